"""Cluster = N brokers, one of which hosts the active controller, and the control API for tests.

Combined mode, as KRaft's `process.roles=broker,controller`: the controller-eligible brokers
(`controller.quorum.voters`, by default all) each hold a copy of the metadata log
(controller/quorum.py); the active controller runs on one of them, and when that broker stops
another live voter is elected (a new controller epoch), replays its copy and resumes what the
last one left half-done. Metadata and DescribeCluster name it; any broker forwards admin
requests to it (ControllerChannel, KIP-590).

    async with Cluster(brokers=3) as c:
        producer = SomeClient(bootstrap_servers=c.bootstrap)

Time and randomness come from the cluster's Clock and IdSource: a seeded cluster (seed=N) repeats
its ids, cluster id and timestamps; an unseeded one gets a random cluster id and the real clock.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from minibroker.broker import trace
from minibroker.broker.strict import Strict
from minibroker.security.credentials import SCRAM_MECHANISM_IDS, Upsertion, store_for_users
from minibroker.broker.broker import Broker
from minibroker.broker.faults import Faults
from minibroker.clock import SEEDED_WALL_BASE_MS, Clock
from minibroker.config import ClusterConfig
from minibroker.controller.controller import Controller
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.quorum import MetadataQuorum, QuorumInfo
from minibroker.controller.result import ControllerHalted, ControllerMoved
from minibroker.broker.fault_admin import FaultAdmin
from minibroker.ids import IdSource, random_cluster_id
from minibroker.log.meta_properties import stored_cluster_id
from minibroker.controller.sessions import BrokerSessions

log = logging.getLogger("minibroker.cluster")

# How often a broker cut from the active controller tries it again (virtual time in simulations).
UNREACHABLE_RETRY_S = 0.1


class ControllerChannel:
    """How a broker reaches the active controller (Kafka: forwarding / AlterPartition RPCs).

    In-process calls: the controller is a separate actor with its own lock and event order;
    if no controller is active (a failover in progress) callers wait for the next one. These
    methods are every controller call a broker makes; each forwards to the active Controller's
    method of the same name (see there for what it does).
    """

    def __init__(self, cluster: "Cluster", broker_id: int | None = None) -> None:
        """broker_id: the broker whose channel this is (None: the cluster's own control API,
        which no network partition cuts)."""
        self.cluster = cluster
        self.broker_id = broker_id

    async def _active(self) -> Controller:
        """The active controller, once this broker can reach it: across a network partition
        the request waits (Kafka's channel manager retries) until healed or the controller moves."""
        while True:
            ctl = await self.cluster.active_controller()
            if self.broker_id is None or \
                    self.cluster.faults.network.reachable(self.broker_id, ctl.controller_id):
                return ctl
            if not self.cluster.brokers[self.broker_id].running:
                raise ConnectionError(f"broker {self.broker_id} stopped")
            await asyncio.sleep(UNREACHABLE_RETRY_S)

    async def _forward(self, call):
        """call(controller) on the active controller; again on the next one if it had stopped
        before writing anything (KIP-590's forwarding retries NOT_CONTROLLER)."""
        while True:
            try:
                return await call(await self._active())
            except ControllerMoved:
                await asyncio.sleep(0)

    def auto_create_topics(self, names: list[str]) -> "asyncio.Task":
        """Create `names` with the defaults; the task ends once every live broker knows them."""
        async def create() -> None:
            await self._forward(lambda c: c.create_topics([(n, -1, -1, None, {}) for n in names],
                                                          validate_only=False))
        return asyncio.get_running_loop().create_task(create())

    # Replication and producer ids (ReplicaManager, Broker).
    async def alter_partition(self, broker_id: int, topic: str, partition: int, leader_epoch: int,
                              partition_epoch: int, new_isr: tuple[int, ...]) -> int:
        return await self._forward(lambda c: c.alter_partition(
            broker_id, topic, partition, leader_epoch, partition_epoch, new_isr))

    async def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        return await self._forward(lambda c: c.allocate_producer_ids(count))

    # Admin requests forwarded by handlers (CreateTopics, DeleteTopics, CreatePartitions, ...).
    async def create_topics(self, specs, validate_only: bool):
        return await self._forward(lambda c: c.create_topics(specs, validate_only=validate_only))

    async def delete_topics(self, names: list[str]):
        return await self._forward(lambda c: c.delete_topics(names))

    async def create_partitions(self, name: str, count: int, assignments, validate_only: bool):
        return await self._forward(lambda c: c.create_partitions(name, count, assignments,
                                                                 validate_only))

    async def alter_topic_configs(self, name: str, changes: dict, replace: bool,
                                  validate_only: bool):
        return await self._forward(lambda c: c.alter_topic_configs(
            name, changes, replace=replace, validate_only=validate_only))

    async def alter_user_scram_credentials(self, deletions: list, upsertions: list) -> list:
        return await self._forward(lambda c: c.alter_user_scram_credentials(deletions,
                                                                            upsertions))

    async def alter_broker_configs(self, resource_name: str, changes: dict, validate_only: bool,
                                   replace: bool = False):
        return await self._forward(lambda c: c.alter_broker_configs(
            resource_name, changes, validate_only=validate_only, replace=replace))

    async def alter_group_configs(self, group_id: str, changes: dict, validate_only: bool,
                                  replace: bool = False):
        return await self._forward(lambda c: c.alter_group_configs(
            group_id, changes, validate_only=validate_only, replace=replace))

    async def describe_group_configs(self, group_id: str):
        return await self._forward(lambda c: c.describe_group_configs(group_id))

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None):
        return await self._forward(lambda c: c.elect_leaders(election_type, partitions))

    # ACLs (CreateAcls, DeleteAcls; KIP-11).
    async def create_acls(self, bindings: list) -> list:
        return await self._forward(lambda c: c.create_acls(bindings))

    async def delete_acls(self, filters: list) -> list:
        return await self._forward(lambda c: c.delete_acls(filters))

    # Reassignments (KIP-455 and the private AssignPartitions / PartitionAssignmentStatus APIs).
    async def assign_partitions(self, assignments: list[tuple[str, int, list[int]]]):
        return await self._forward(lambda c: c.assign_partitions(assignments))

    async def alter_partition_reassignments(self, items: list, allow_rf_change: bool) -> list:
        return await self._forward(lambda c: c.alter_partition_reassignments(items,
                                                                            allow_rf_change))

    async def list_partition_reassignments(self, wanted: dict[str, list[int]] | None) -> list:
        return await self._forward(lambda c: c.list_partition_reassignments(wanted))

    async def partition_assignment_status(self, request_id: int):
        return await self._forward(lambda c: c.partition_assignment_status(request_id))

    # DescribeQuorum (KIP-595): the quorum is the cluster's, no controller call needed.
    async def describe_quorum(self) -> QuorumInfo:
        c = self.cluster
        # Observers: the unfenced registered brokers (child processes' too) that are not voters.
        ctl = c.controller
        observers = [] if ctl is None else [b.broker_id for b in ctl.image.live_brokers()]
        return c.quorum.describe(c.clock.now_ms(), observers)


class Cluster:
    def __init__(self, config: ClusterConfig | None = None, clock: Clock | None = None,
                 **overrides: Any) -> None:
        """`clock`: the one Clock of the controller and every broker; by default its wall-clock
        base is config.wall_clock_base_ms, else fixed for a seeded cluster, else now."""
        config = config or ClusterConfig()
        self.config = config.with_overrides(**overrides) if overrides else config
        seeded = self.config.seed is not None
        seed = self.config.seed if seeded else 0
        if clock is None:
            base = self.config.wall_clock_base_ms
            clock = Clock(base if base is not None else SEEDED_WALL_BASE_MS if seeded else None)
        self.clock = clock
        self.ids = IdSource(seed, random_ids=not seeded)
        seeded_id = self.ids.cluster_id()   # drawn either way: the ids after it are the seed's
        self.cluster_id = self.config.cluster_id or (seeded_id if seeded else random_cluster_id())
        self.faults = Faults()
        self.quorum = MetadataQuorum(self.config.quorum_voters(), self.config.data_dir)
        # Started again on a data directory: its cluster id, and ids that differ from those the
        # last run drew (a topic id drawn twice would name two topics).
        salt = len(self.quorum.leader_log()) << 32
        if self.config.data_dir is not None:
            self.cluster_id = stored_cluster_id(self.config.data_dir, self.config.brokers,
                                                self.cluster_id)
            if salt:
                self.ids = IdSource(seed + salt, random_ids=not seeded)
        # Every broker registered in a log read from disk belongs to a process that is gone: the
        # first controller fences them all (their registrations name old ports) until each
        # registers again, as KRaft brokers stay fenced until their first heartbeat.
        self._restarted = bool(salt)
        self.controller: Controller | None = None
        self._controller_ready = asyncio.Event()
        self._controller_wanted = True      # False from stop_controller() to start_controller()
        self._election = asyncio.Lock()
        self.channel = ControllerChannel(self)
        self.sessions = BrokerSessions(self)
        # The users SASL authenticates (--user), one store shared by the brokers.
        self.credentials = store_for_users(self.config.users, IdSource(seed + 7919).rng)
        self.brokers: dict[int, Broker] = {}
        for i in range(1, self.config.brokers + 1):
            port = self.config.port + i - 1 if self.config.port else 0
            ids = IdSource(seed * 1000 + i + salt, random_ids=not seeded)
            self.brokers[i] = Broker(i, self.config, self.clock, ids, ControllerChannel(self, i),
                                     self.faults, port=port, rack=self.config.rack_of(i),
                                     credentials=self.credentials)
        # serve --trace / --strict: one observer of every broker's client exchanges.
        self.strict = Strict(self.config) if self.config.strict else None
        self.tracer = trace.attach(self.brokers.values(), self.config, self.strict)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> "Cluster":
        try:
            for b in self.brokers.values():
                await b.start()
                self.quorum.voter_started(b.node_id)
            await self.start_controller()
            for b in self.brokers.values():
                b.broker_epoch = await self.controller.register_broker(
                    b.node_id, b.host, b.port, b.rack, b.control_port,
                    b.registration_listeners())
            await self._record_users()
        except BaseException:
            await self.stop()                # close the listeners already open (a port taken)
            raise
        return self

    async def _record_users(self) -> None:
        """`--user`'s SCRAM credentials as UserScramCredentialRecords (those the metadata log
        does not hold yet), so they are replicated and replayed like any other change."""
        known = self.controller.image.scram_credentials
        upsertions = [Upsertion(user, SCRAM_MECHANISM_IDS[mech], cred)
                      for (user, mech), cred in sorted(self.credentials.scram.items())
                      if (user, SCRAM_MECHANISM_IDS[mech]) not in known]
        if upsertions:
            await self.channel.alter_user_scram_credentials([], upsertions)

    async def stop(self) -> None:
        self._controller_wanted = False
        await self.sessions.stop()
        self.faults.clear()                 # held requests go on, dropped ones' connections close
        if self.controller is not None:
            await self.controller.stop()
        for b in self.brokers.values():
            if b.running:
                await b.stop()
        if self.tracer is not None:
            self.tracer.close()

    async def __aenter__(self) -> "Cluster":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    @property
    def violations(self) -> list[dict]:
        """Strict mode's record of the protocol rules clients broke (broker/strict.py)."""
        return [] if self.strict is None else list(self.strict.violations)

    @property
    def bootstrap(self) -> str:
        """The running brokers' inter-broker listener (the only one, unless `listeners` says)."""
        return ",".join(b.endpoint for b in self.brokers.values() if b.running)

    def bootstrap_for(self, listener: str) -> str:
        """The running brokers' addresses on the listener named `listener` (e.g. "SASL_SSL")."""
        out = []
        for b in self.brokers.values():
            if b.running:
                (addr,) = [a for a in b.advertised_listeners() if a.name == listener.upper()]
                out.append(f"{addr.host}:{addr.port}")
        return ",".join(out)

    # ------------------------------------------------------------------ controller
    async def active_controller(self) -> Controller:
        await self._controller_ready.wait()
        return self.controller

    @property
    def metadata_log(self) -> MetadataLog:
        """The active controller's copy of the metadata log (else the longest copy)."""
        return self.quorum.leader_log()

    @property
    def controller_epoch(self) -> int:
        return self.quorum.epoch

    @property
    def controller_node_id(self) -> int:
        """The broker hosting the active controller; -1 while there is none."""
        return self.controller.controller_id if self.controller is not None else -1

    async def start_controller(self) -> None:
        """Elect a live voter (a new controller epoch): its controller replays its copy of the
        log, finishes what the last one left half-done and fences brokers that stopped meanwhile.
        No live voter: none now; the next voter to start is elected."""
        self._controller_wanted = True
        await self.elect_controller()

    @property
    def controller_wanted(self) -> bool:
        return self._controller_wanted

    def can_lead(self, voter: int) -> bool:
        """Whether `voter` is live and (across network partitions) reaches a majority of the
        live voters, itself included: only such a voter may be elected or stay the leader."""
        q, net = self.quorum, self.faults.network
        live = [v for v in q.voters if v in q.live]
        return voter in live and 2 * sum(net.reachable(voter, u) for u in live) > len(live)

    async def elect_controller(self) -> None:
        if not self._controller_wanted:
            return                          # stop_controller() or stop(): none until asked
        async with self._election:
            while self.controller is None and self._controller_wanted:
                leader = self.quorum.elect([v for v in self.quorum.voters if self.can_lead(v)])
                if leader < 0:
                    return
                epoch = self.quorum.epoch
                ctl = Controller(self.quorum.view(leader, epoch), epoch, controller_id=leader,
                                 config=self.config, clock=self.clock, ids=self.ids,
                                 fault_enabled=lambda site: site in self.faults.enabled_sites,
                                 on_halt=self.controller_halted, network=self.faults.network)
                for b in self.brokers.values():
                    b.metadata.cluster_id = self.cluster_id
                gone = tuple(sorted(i for i, b in self.brokers.items()
                                    if not b.running or self._restarted))
                self._restarted = False
                try:
                    await ctl.start(gone)
                except ControllerHalted:
                    pass
                if (self.quorum.leader_id, self.quorum.epoch) != (leader, epoch):
                    await ctl.stop()        # its broker stopped while it started: the next one
                    continue
                self.controller = ctl
                self._controller_ready.set()

    def controller_halted(self, ctl: Controller) -> None:
        """A controller stopped itself (a fault site): elect the next one, as Kafka would."""
        if ctl is not self.controller:
            return
        self._controller_ready.clear()
        self.quorum.resign()

        async def failover() -> None:
            await ctl.stop()
            if self.controller is ctl:
                self.controller = None
                await self.elect_controller()
        asyncio.get_running_loop().create_task(failover())

    async def stop_controller(self) -> None:
        """The active controller resigns (wherever it is in a procedure), and none is elected
        until start_controller(). Records stay in the log."""
        self._controller_wanted = False
        self._controller_ready.clear()
        self.quorum.resign()
        if self.controller is not None:
            ctl, self.controller = self.controller, None
            await ctl.stop()

    async def fence_broker(self, broker_id: int) -> None:
        ctl = self.controller
        if ctl is not None:
            try:
                await ctl.fence_broker(broker_id)
            except (ControllerMoved, ControllerHalted):
                pass                        # the next controller fences it when it starts

    # ------------------------------------------------------------------ control API
    async def stop_broker(self, broker_id: int) -> None:
        """Stop a broker (as a crash would); if it hosts the active controller, that stops too
        (it writes nothing more from here) and another live voter takes over."""
        b = self.brokers[broker_id]
        ctl = self.controller
        hosted = ctl is not None and ctl.controller_id == broker_id
        self.quorum.voter_stopped(broker_id)
        self.sessions.broker_stopped(broker_id)
        if hosted:
            self._controller_ready.clear()
            self.controller = None
            await ctl.stop()
        await b.stop()
        if hosted and self._controller_wanted:
            await self.elect_controller()                 # fences broker_id as it starts
        else:
            await self.fence_broker(broker_id)

    async def start_broker(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        await b.start()
        self.quorum.voter_started(broker_id)
        if self.controller is None:
            await self.elect_controller()
        ctl = self.controller
        if ctl is not None and not self.faults.network.reachable(broker_id, ctl.controller_id):
            self.sessions.broker_started(broker_id, registered=False)  # registers once healed
            return
        await self.register(broker_id)
        self.sessions.broker_started(broker_id, registered=True)

    async def register(self, broker_id: int) -> None:
        """Register (or re-register) a running broker with the active controller: unfenced,
        with a new broker epoch."""
        b = self.brokers[broker_id]
        b.broker_epoch = await self.channel._forward(lambda c: c.register_broker(
            b.node_id, b.host, b.port, b.rack, b.control_port, b.registration_listeners()))

    async def restart_broker(self, broker_id: int, rack: str | None = None) -> None:
        await self.stop_broker(broker_id)
        if rack is not None:
            self.brokers[broker_id].rack = rack
        await self.start_broker(broker_id)

    async def failover_controller(self) -> int:
        """The active controller resigns wherever it is (as its broker losing the quorum would)
        and another voter that can lead is elected (a new controller epoch), which resumes from
        the metadata log. Returns the new controller's broker id (-1: none could be elected)."""
        ctl = self.controller
        if ctl is not None:
            self._controller_ready.clear()
            self.quorum.resign()
            self.controller = None
            await ctl.stop()
        await self.elect_controller()
        if self.controller is None:
            self.sessions.start()           # elected once a voter reaches a majority again
        return self.controller_node_id

    # ------------------------------------------------------------------ network partitions
    async def partition_network(self, side_a, side_b) -> None:
        """Cut every link between a broker of side_a and one of side_b (iterables of broker
        ids), both ways, until heal_network(): replica fetches, the controller's requests and
        a broker's heartbeats, forwarding and AlterPartition to it, WriteTxnMarkers all fail as
        a lost connection. Kafka's behaviour follows on the cluster's clock: a follower cut from
        its leader leaves the ISR after replica.lag.time.max.ms; a broker cut from the active
        controller is fenced after broker.session.timeout.ms; a controller cut from the majority
        of the quorum's live voters resigns after controller.quorum.fetch.timeout.ms and the
        majority elects another. (The metadata log's own replication is not cut.)"""
        self.faults.network.partition(side_a, side_b)
        self.sessions.start()

    async def heal_network(self) -> None:
        """End every network partition between brokers: fenced brokers' heartbeats reach the
        controller again (unfenced), a controller is elected if none could be, and every broker
        gets the metadata it missed."""
        self.faults.network.heal()
        await self.sessions.tick()
        ctl = self.controller
        if ctl is not None:
            try:
                await ctl.resync_brokers()
            except (ControllerMoved, ControllerHalted):
                pass                        # the next controller's start syncs every broker

    def isolate_clients(self, broker_id: int) -> None:
        """No client reaches broker_id until heal_clients(): its client connections close, and
        so does every new one at its first request (other brokers still reach it)."""
        self.faults.isolate_clients(broker_id)
        b = self.brokers[broker_id]
        b.close_client_connections(f"network partition: clients cut from broker {broker_id}")

    def heal_clients(self, broker_id: int | None = None) -> None:
        """Clients reach broker_id (None: every broker) again."""
        self.faults.heal_clients(broker_id)

    def enable_fault_admin(self) -> None:
        """Serve FaultControl (`minibroker faults ...`) on every broker's client listener."""
        admin = FaultAdmin(self)
        for b in self.brokers.values():
            b.fault_admin = admin

    async def clear_faults(self) -> None:
        """Every fault off: request faults (Faults.clear), partitions, client isolation."""
        self.faults.clear()
        self.heal_clients()
        await self.heal_network()

    async def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                           configs: dict[str, str] | None = None) -> None:
        [res] = await self.channel.create_topics([(name, partitions, replication_factor, None,
                                                   configs or {})], validate_only=False)
        if res.error_code:
            raise RuntimeError(f"create_topic {name}: error {res.error_code}: {res.message}")
        await self.wait_for_leaders(name)

    async def wait_for_leaders(self, topic: str, timeout: float = 10.0) -> None:
        """Until every live broker's metadata shows a leader for every partition of topic."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end:
            ok = True
            for b in self.brokers.values():
                t = b.metadata.topics.get(topic) if b.running else None
                if b.running and (t is None or any(p.leader < 0 for p in t.partitions.values())):
                    ok = False
            if ok:
                return
            await asyncio.sleep(0.01)
        raise TimeoutError(f"no leaders for {topic}")

    # -------------------------------------------- what an autoscaling client must survive (KIP-878)
    def set_metadata_propagation_delay(self, broker_id: int, delay_ms: int | None) -> None:
        """Broker `broker_id` applies each UpdateMetadata `delay_ms` after it arrives (None: back
        to its minibroker.metadata.propagation.delay.ms), so its Metadata answers lag others'."""
        if delay_ms is None:
            self.faults.update_metadata_delay_ms.pop(broker_id, None)
        else:
            self.faults.update_metadata_delay_ms[broker_id] = delay_ms

    def set_controller_mutation_rate(self, rate: float, client_id: str | None = None) -> None:
        """KIP-599 quota (partition mutations/s) for `client_id`, or every client's default."""
        for b in self.brokers.values():
            b.controller_mutation_quota.set_rate(rate, client_id)

    def fail_create_partitions(self, topic: str, error: Any, times: int = 1,
                               throttle_time_ms: int = 0) -> None:
        """The next `times` CreatePartitions naming `topic` answer `error` (a class or code) for it
        alone; THROTTLING_QUOTA_EXCEEDED carries `throttle_time_ms` (v0-v2 get only the latter)."""
        code = error if isinstance(error, int) else error.errno
        self.faults.push_topic_errors(37, topic, [(code, throttle_time_ms)] * times)

    def stall_create_partitions(self, delay_ms: int, times: int = 1) -> None:
        """The controller's part of the next `times` CreatePartitions takes `delay_ms` longer."""
        self.faults.stall(37, delay_ms, times)

    async def leader_of(self, topic: str, partition: int) -> int:
        return (await self.active_controller()).partition(topic, partition).leader

    async def move_leader(self, topic: str, partition: int, to: int) -> int:
        return await self.channel._forward(lambda c: c.elect_leader(topic, partition, to))

    async def partition_state(self, topic: str, partition: int) -> dict:
        """The controller's registration plus every replica's log state."""
        reg = (await self.active_controller()).partition(topic, partition)
        replicas = {}
        for bid, b in self.brokers.items():
            p = b.replica_manager.get(topic, partition)
            if p is not None:
                replicas[bid] = dict(log_start_offset=p.log.log_start_offset,
                                     log_end_offset=p.log.log_end_offset,
                                     high_watermark=p.high_watermark, leader_epoch=p.leader_epoch)
        return dict(leader=reg.leader, leader_epoch=reg.leader_epoch, isr=reg.isr,
                    replicas=reg.replicas, partition_epoch=reg.partition_epoch, logs=replicas)
