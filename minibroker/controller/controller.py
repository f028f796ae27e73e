"""The active controller: turns requests into records, replays them, propagates the result.

Every change is: a pure operation `op(image, request, ids) -> Result(records, response)`
(topics, partition_count, reassignment, brokers, partitions; records built in records.py) →
append to the metadata log → replay into a delta → apply → new frozen image → the propagator
sends LeaderAndIsr, UpdateMetadata and StopReplica to the brokers → the response. Operations run
one at a time under one lock (an event queue, as in Kafka's QuorumController); the controller's
own tasks (partition_removal, reassignment_progress) get the narrow `write(op)` / `log_bounds`
way in. A new controller replays the log from its latest snapshot and resumes from it.

The log is the quorum's (quorum.py): this controller appends as leader of its epoch, and once
another voter is elected (its broker stopped) every append is refused — a stopped controller
writes nothing more. A step of a multi-step procedure is committed (every live voter holds it)
before the next starts, so a stop can fall between two steps; the next controller finishes it.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Coroutine, Sequence, TypeVar

from kafka.errors import PolicyViolationError, RequestTimedOutError

from minibroker.clock import Clock
from minibroker.config import ClusterConfig
from minibroker.controller import (acls, broker_configs, brokers, elections, group_configs,
                                   partition_count, partitions, reassignment, scram, topics)
from minibroker.controller.changelog import log_changes
from minibroker.controller.delta import MetadataDelta
from minibroker.controller.image import MetadataImage, PartitionRegistration
from minibroker.controller.log_bounds import log_bounds
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.partition_removal import removal_loop
from minibroker.controller.propagator import Propagator
from minibroker.controller.quorum import LeaderLog, NotLeader
from minibroker.controller.raft import RaftLog
from minibroker.controller.reassignment_progress import Progress, progress
from minibroker.controller.records import Listeners
from minibroker.controller.result import ControllerHalted, ControllerMoved, ItemResult, Result
from minibroker.controller.topics import TopicSpec
from minibroker.ids import IdSource
from minibroker.network.partitions import NetworkPartitions
from minibroker.security.acl import AclBinding, AclBindingFilter
from minibroker.security.credentials import Upsertion

log = logging.getLogger("minibroker.controller")


# Records appended between two yields to the event loop: ~10,000 records took seconds in one go,
# while every broker and client of an in-process cluster shares this loop; each costs ~0.15 ms
# (encoded into the log, replayed), so 50 is ~8 ms.
YIELD_EVERY_RECORDS = 50

T = TypeVar("T")


class Controller:
    def __init__(self, metadata_log: MetadataLog | LeaderLog | RaftLog, controller_epoch: int, *,
                 controller_id: int, config: ClusterConfig, clock: Clock, ids: IdSource,
                 fault_enabled: Callable[[str], bool],
                 on_halt: Callable[["Controller"], None],
                 network: NetworkPartitions | None = None) -> None:
        """fault_enabled(site): whether a named fault site is on; on_halt(self): this controller
        stopped itself at one (the cluster elects the next)."""
        self.config = config
        self.ids = ids
        self.clock = clock
        self.log = metadata_log
        self.controller_epoch = controller_epoch
        self.controller_id = controller_id
        self._fault_enabled = fault_enabled
        self._on_halt = on_halt
        self.image = MetadataImage()
        # A broker silent for its session is fenced; the controller waits no longer on it.
        self.propagator = Propagator(self.controller_id, controller_epoch, network,
                                     config.broker_session_timeout_ms / 1000)
        self._lock = _ActiveLock(self)
        self._tasks: list[asyncio.Task[None]] = []
        self.running = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self, stopped_brokers: tuple[int, ...] = ()) -> None:
        """Replay the log; fence `stopped_brokers` (registered brokers whose process is gone:
        their heartbeats stopped), then finish what the last controller left half-done."""
        self.image = self.log.snapshot or MetadataImage()      # the latest snapshot, if any
        delta = MetadataDelta(self.image)
        for offset, record in self.log.read_all():
            delta.replay(record, offset)
        self.image = delta.apply()
        self.running = True
        for broker_id in stopped_brokers:
            await self.commit(list(brokers.fence_broker(self.image, broker_id).records),
                              propagate=False)
        resumed = partition_count.resume_records(self.image, self.ids) + \
            reassignment.completion_records(self.image)
        if resumed:
            await self.commit(resumed, propagate=False)
        await self.propagator.full_sync(self.image)
        self.spawn(removal_loop(self, self.config.partition_deletion_check_interval_ms))
        if self.config.auto_leader_rebalance_enable:
            self.spawn(elections.rebalance_loop(
                self, self.config.leader_imbalance_check_interval_seconds,
                self.config.leader_imbalance_per_broker_percentage))

    async def stop(self) -> None:
        self.running = False
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.propagator.close()

    async def resync_brokers(self) -> None:
        """Send every live broker the whole state again: after a network partition healed, the
        brokers it cut off missed what was propagated meanwhile (KRaft brokers would fetch it
        from the metadata log)."""
        async with self._lock:
            await self.propagator.full_sync(self.image)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro))

    # ------------------------------------------------------------------ commit
    async def _write(self, result: Result[T]) -> T:
        """Commit an operation's records, then give its response. Caller holds the lock."""
        await self.commit(result.records)
        return result.response

    async def write(self, op: Callable[[MetadataImage], Result[T]]) -> T:
        """Run an operation on the current image under the lock and commit its records (the
        controller tasks' way in, as Kafka's appendWriteEvent)."""
        async with self._lock:
            return await self._write(op(self.image))

    async def log_bounds(self, broker_id: int, topic: str,
                         partition: int) -> tuple[int | None, int | None]:
        """(log start, log end offset) of a replica's log on `broker_id`; (None, None) if it
        cannot answer."""
        return await log_bounds(self.propagator.connection, self.image.brokers.get(broker_id),
                                topic, partition)

    async def commit(self, records: Sequence[Any], propagate: bool = True) -> MetadataImage:
        """Append, replay, apply, propagate. Caller holds the lock."""
        if not records:
            return self.image
        return await self.commit_steps([records], site=None, propagate=propagate)

    async def commit_steps(self, steps: Sequence[Sequence[Any]], site: str | None,
                           propagate: bool = True) -> MetadataImage:
        """Append each step to the log in turn, then propagate once.

        A named fault site `<site>.step<N>` stops this controller right after step N was
        appended, as a crash between two steps would; the next controller resumes from the log.
        """
        old = self.image
        delta = MetadataDelta(old)
        for i, step in enumerate(steps, 1):
            try:
                for n, record in enumerate(step, 1):
                    delta.replay(record, self.log.append(record))
                    if n % YIELD_EVERY_RECORDS == 0:
                        await asyncio.sleep(0)  # others are served; the image changes at the end
                # Step i is durable on every live voter before step i+1 starts (a real await:
                # the controller's broker may stop here).
                await self._commit_log()
            except NotLeader:
                self.running = False
                raise ControllerHalted(f"{site or 'commit'}.step{i}: {self.controller_id} "
                                       "is no longer the active controller") from None
            if site and i < len(steps) and self._fault_enabled(f"{site}.step{i}"):
                self.image = delta.apply()
                self.running = False
                self._on_halt(self)
                raise ControllerHalted(f"{site}.step{i}")
        self.image = delta.apply()
        self.log.maybe_snapshot(self.image, self.config.metadata_log_max_record_bytes_between_snapshots)
        log_changes(old, self.image)
        if propagate:
            await self.propagator.propagate(old, self.image, delta)
        return self.image

    async def _commit_log(self) -> None:
        commit = getattr(self.log, "commit", None)
        if commit is not None:
            await commit()

    # ------------------------------------------------------------------ brokers
    async def register_broker(self, broker_id: int, host: str, port: int,
                              rack: str | None, control_port: int = -1,
                              listeners: Listeners = ()) -> int:
        async with self._lock:
            return await self._write(brokers.register_broker(self.image, broker_id, host, port,
                                                             rack, control_port, listeners))

    async def fence_broker(self, broker_id: int) -> None:
        async with self._lock:
            await self._write(brokers.fence_broker(self.image, broker_id))

    async def unfence_broker(self, broker_id: int, broker_epoch: int) -> bool:
        """A fenced broker heard from again; False: not with its registered epoch."""
        async with self._lock:
            return await self._write(brokers.unfence_broker(self.image, broker_id, broker_epoch))

    # ------------------------------------------------------------------ partitions
    async def alter_partition(self, broker_id: int, topic: str, partition: int, leader_epoch: int,
                              partition_epoch: int, new_isr: tuple[int, ...]) -> int:
        async with self._lock:
            res = partitions.alter_partition(self.image, broker_id, topic, partition,
                                             leader_epoch, partition_epoch, new_isr)
            reg = self.partition(topic, partition)      # there, when the change has records
            moving = bool(res.records) and reg is not None and reg.reassigning
            await self._write(res)
            if moving:
                await self._complete_reassignments()
            return res.response

    async def elect_leader(self, topic: str, partition: int, preferred: int | None = None) -> int:
        """Move leadership (control API / ElectLeaders): to `preferred` if in ISR and alive."""
        async with self._lock:
            return await self._write(partitions.elect_leader(self.image, topic, partition,
                                                             preferred))

    async def elect_leaders(self, election_type: int,
                            partitions: list[tuple[str, int]] | None
                            ) -> list[elections.ElectionResult]:
        """ElectLeaders: preferred or unclean elections, one commit (controller/elections.py)."""
        async with self._lock:
            return await self._write(elections.elect_leaders(self.image, election_type,
                                                             partitions))

    async def rebalance_leaders(self, per_broker_percentage: int) -> list[tuple[str, int]]:
        """One auto leader rebalance round (elections.rebalance_loop): the partitions moved."""
        async with self._lock:
            wanted = elections.imbalanced_partitions(self.image, per_broker_percentage)
            if not wanted:
                return []
            results = await self._write(elections.elect_leaders(self.image,
                                                                elections.PREFERRED, wanted))
            return [(t, p) for t, p, code, _ in results if code == 0]

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.image.topics.get(topic)
        return t.partitions.get(partition) if t else None

    # ------------------------------------------------------------------ topics
    # Partitions created per commit: a commit per topic made creating T topics cost O(T^2) (each
    # commit rebuilds the image's topic map and propagates); one commit for a whole request of
    # 10,000 partitions left a broker's RSS 21 MB higher (one LeaderAndIsr and UpdateMetadata that
    # size, built at once); up to 300, RSS stays as with a commit per topic (71 MB).
    CREATE_CHUNK_PARTITIONS = 300

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool) -> list[ItemResult]:
        """specs: (name, partitions, replication_factor, assignments|None, configs). Commits at
        topic boundaries, each once it holds CREATE_CHUNK_PARTITIONS partitions; the records
        are built YIELD_EVERY_RECORDS partitions per turn of the loop."""
        async with self._lock:
            plans, response = topics.plan_topics(self.image, specs, self.ids, self.config)
            if validate_only:
                return response
            chunk: list[Any] = []
            pending = 0
            for plan in plans:
                if pending >= self.CREATE_CHUNK_PARTITIONS:
                    await self.commit(chunk)
                    chunk, pending = [], 0
                chunk += plan.head()
                for start in range(0, len(plan.parts), YIELD_EVERY_RECORDS):
                    chunk += plan.partition_records(start, start + YIELD_EVERY_RECORDS)
                    if start:
                        await asyncio.sleep(0)
                pending += len(plan.parts)
            await self.commit(chunk)
            return response

    async def delete_topics(self, names: list[str]) -> list[ItemResult]:
        async with self._lock:
            return await self._write(topics.delete_topics(self.image, names))

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> ItemResult:
        async with self._lock:
            res = partition_count.change_partition_count(self.image, name, count, assignments,
                                                         self.ids)
            limit, t = self.config.max_partitions, self.image.topics.get(name)
            if res.records and t is not None and count > t.undeleted_partition_count:
                total, adding = topics.total_partitions(self.image), count - len(t.partitions)
                if total + adding > limit:
                    return ItemResult(PolicyViolationError.errno,
                                      topics.partition_limit_reason(adding, total, limit))
            if validate_only or not res.records:
                return res.response
            try:
                await self.commit_steps(res.log_steps(), site="controller.partition_count")
            except ControllerHalted:
                return ItemResult(RequestTimedOutError.errno,
                                  "The controller stopped during the change; the next controller "
                                  "completes it from the metadata log")
            return res.response

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None], replace: bool,
                                  validate_only: bool) -> ItemResult:
        async with self._lock:
            res = topics.alter_topic_configs(self.image, name, changes, replace)
            return res.response if validate_only else await self._write(res)

    async def alter_broker_configs(self, resource_name: str, changes: dict[str, str | None],
                                   validate_only: bool, replace: bool = False) -> ItemResult:
        async with self._lock:
            res = broker_configs.alter_broker_configs(self.image, resource_name, changes,
                                                      replace)
            return res.response if validate_only else await self._write(res)

    async def alter_group_configs(self, group_id: str, changes: dict[str, str | None],
                                  validate_only: bool,
                                  replace: bool = False) -> ItemResult:
        async with self._lock:
            res = group_configs.alter_group_configs(self.image, self.config, group_id, changes,
                                                    replace)
            return res.response if validate_only else await self._write(res)

    async def describe_group_configs(self, group_id: str) -> dict[str, str]:
        """The configs set on the group (KIP-848), from the committed image."""
        return dict(self.image.group_configs.get(group_id, {}))

    # ------------------------------------------------------------------ ACLs (KIP-11)
    async def create_acls(self, bindings: list[AclBinding]) -> list[acls.Creation]:
        async with self._lock:
            return await self._write(acls.create_acls(self.image, bindings, self.ids))

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[acls.Deletion]:
        async with self._lock:
            return await self._write(acls.delete_acls(self.image, filters))

    async def alter_user_scram_credentials(self, deletions: list[tuple[str, int]],
                                           upsertions: list[Upsertion]) -> list[scram.UserResult]:
        """KIP-554 (controller/scram.py): [(user, error code, message)]."""
        async with self._lock:
            return await self._write(scram.alter_user_scram_credentials(
                self.image, deletions, upsertions))

    # ------------------------------------------------------------------ reassignment (KIP-179)
    async def assign_partitions(self, assignments: list[tuple[str, int, list[int]]]
                                ) -> reassignment.Accepted:
        """Start moving partitions to new replica sets; returns reassignment.Accepted."""
        async with self._lock:
            res = reassignment.plan(self.image, assignments, self.clock.now_ms(),
                                    self.config.reassign_partitions_status_min_retention_ms)
            if res.records:
                await self._write(res)
                await self._complete_reassignments()
            return res.response

    async def alter_partition_reassignments(self, items: list[tuple[str, int, list[int] | None]],
                                            allow_rf_change: bool
                                            ) -> list[reassignment.AlterResult]:
        """KIP-455 (AlterPartitionReassignments): [(topic, partition, error code, message)]."""
        async with self._lock:
            res = reassignment.plan_alter(
                self.image, items, self.clock.now_ms(),
                self.config.reassign_partitions_status_min_retention_ms, allow_rf_change)
            if res.records:
                await self._write(res)
                await self._complete_reassignments()
            return res.response

    async def list_partition_reassignments(self, wanted: dict[str, list[int]] | None
                                           ) -> list[tuple[str, int, PartitionRegistration]]:
        """KIP-455 (ListPartitionReassignments): [(topic, partition, registration)] moving now."""
        return reassignment.ongoing(self.image, wanted)

    async def _complete_reassignments(self) -> None:
        await self.commit(reassignment.completion_records(self.image))

    async def partition_assignment_status(self, request_id: int
                                          ) -> tuple[int, int, list[Progress]]:
        """(error code, request id, [reassignment.Progress]) — -1 asks for the latest request."""
        ra = reassignment.request(self.image, request_id)
        if ra is None:
            return reassignment.INVALID_REQUEST, request_id, []
        return 0, ra.request_id, await progress(self.image, ra, self.log_bounds)

    # ------------------------------------------------------------------ producer ids
    async def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        async with self._lock:
            return await self._write(brokers.allocate_producer_ids(self.image, self.controller_id,
                                                                   count))


class _ActiveLock:
    """The controller's event-queue lock; entered only while this controller is active, else
    ControllerMoved (nothing was written: the caller may go to the next controller)."""

    def __init__(self, ctl: Controller) -> None:
        self._ctl = ctl
        self._lock = asyncio.Lock()

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        if not self._ctl.running:
            raise ControllerMoved(self._ctl.controller_id)
        await self._lock.acquire()
        if not self._ctl.running:
            self._lock.release()
            raise ControllerMoved(self._ctl.controller_id)

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()
