"""The reference consumer's classic group membership (Kafka's ConsumerCoordinator): find the
coordinator, JoinGroup with the 'consumer' protocol and our assignors, the leader assigns (range /
roundrobin; KIP-253 part 6: undeleted and marked-for-deletion partitions as two lists), SyncGroup,
heartbeats on the coordinator connection, LeaveGroup on close.

REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID -> commit (auto), revoke, rejoin;
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS -> find it again.
`GroupMembership` is a part of minibroker.client.consumer.Consumer and uses its state (the
partition states, the subscription, the listeners, the ordering barrier).
"""
from __future__ import annotations

import asyncio
import logging

import kafka.errors as Errors
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
                                     SyncGroupRequest)
from kafka.protocol.metadata import FindCoordinatorRequest

from minibroker.client.group_protocol import (ASSIGNORS, decode_assignment, decode_subscription,
                                              encode_assignment, encode_subscription, split_assign)
from minibroker.client.kip253 import marked_for_deletion
from minibroker.client.listeners import call_listener
from minibroker.client.partition_state import PartitionState
from minibroker.client.records import TopicPartition

log = logging.getLogger("minibroker.client.consumer")

COORDINATOR_NODE_BASE = 1 << 30        # coordinator connections are separate, like Kafka's

REJOIN_ERRORS = {Errors.RebalanceInProgressError.errno, Errors.IllegalGenerationError.errno,
                  Errors.UnknownMemberIdError.errno}
COORDINATOR_ERRORS = {Errors.NotCoordinatorError.errno, Errors.CoordinatorNotAvailableError.errno,
                       Errors.CoordinatorLoadInProgressError.errno}


class GroupMembership:
    async def _leave_group(self) -> None:
        node = await self._ensure_coordinator()
        conn = await self.pool.get(node)
        version = self.pool.version(conn, LeaveGroupRequest)
        req = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id, members=[
            LeaveGroupRequest.MemberIdentity(member_id=self.member_id, group_instance_id=None,
                                             reason="consumer closed")])
        await conn.request(req, version, timeout=self.pool.request_timeout)
        self.member_id = ""
        self.generation_id = -1

    # ------------------------------------------------------------------ group membership
    def _coordinator_dead(self, node: int | None) -> None:
        if node is not None:
            self.pool.close_node(node, "coordinator failed")
        self._coordinator = None
        for st in self._parts.values():          # a new coordinator knows no positions of ours
            st.reported = None

    def _need_rejoin(self, code: int) -> None:
        if code in (Errors.UnknownMemberIdError.errno, Errors.IllegalGenerationError.errno):
            if code == Errors.UnknownMemberIdError.errno:
                self.member_id = ""
            self.generation_id = -1
        self._rejoin = True
        self._kick()

    async def _ensure_coordinator(self) -> int:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.pool.request_timeout
        while self._coordinator is None:
            try:
                node, conn = await self.pool.any_connection()
                version = self.pool.version(conn, FindCoordinatorRequest, hi=6)
                if version >= 4:
                    req = FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group_id])
                else:
                    req = FindCoordinatorRequest(key=self.group_id, key_type=0)
                resp = await conn.request(req, version, timeout=self.pool.request_timeout)
                if version >= 4:
                    c = resp.coordinators[0]
                    code, cid, host, port = c.error_code, c.node_id, c.host, c.port
                else:
                    code, cid, host, port = resp.error_code, resp.node_id, resp.host, resp.port
                if code == 0:
                    node_key = COORDINATOR_NODE_BASE + cid
                    self.pool.update_addresses({node_key: (host, port)})
                    self._coordinator = node_key
                    return node_key
                err = Errors.for_code(code)
                if not err.retriable and code not in COORDINATOR_ERRORS:
                    raise err(f"FindCoordinator {self.group_id}")
            except (ConnectionError, asyncio.TimeoutError, Errors.KafkaConnectionError,
                    Errors.NodeNotReadyError) as e:
                log.debug("FindCoordinator: %r", e)
            if loop.time() > end:
                raise Errors.CoordinatorNotAvailableError(f"no coordinator for {self.group_id}")
            await asyncio.sleep(self.retry_backoff)
        return self._coordinator

    async def _call_listener(self, name: str, tps: set[TopicPartition]) -> None:
        await call_listener(self._listener, name, tps)

    async def _revoke(self) -> None:
        if not self._parts:
            return
        if self.enable_auto_commit and self.generation_id >= 0:
            await self._auto_commit()
        await self._call_listener("on_partitions_revoked", set(self._parts))
        self._parts = {}

    async def _rejoin_group(self) -> None:
        await self._revoke()
        self._joined = False
        self._rejoin = False
        self._ordering.reset()
        try:                     # the leader assigns, and everyone compares, with fresh metadata
            await self.metadata.refresh(self._subscription, timeout=self.pool.request_timeout)
        except (asyncio.TimeoutError, Errors.KafkaError) as e:
            log.debug("metadata before join: %r", e)
        self._refresh_before_join = False
        node = await self._ensure_coordinator()
        try:
            conn = await self.pool.get(node)
        except Errors.KafkaConnectionError:
            self._coordinator_dead(node)
            raise
        resp = await self._join_group(conn, node)
        if resp.error_code:
            self._rejoin = True
            if resp.error_code in COORDINATOR_ERRORS:
                self._coordinator_dead(node)
            if resp.error_code in (Errors.UnknownMemberIdError.errno,
                                   Errors.IllegalGenerationError.errno):
                self.member_id = ""
            err = Errors.for_code(resp.error_code)
            if err.retriable or resp.error_code in COORDINATOR_ERRORS | REJOIN_ERRORS:
                await asyncio.sleep(self.retry_backoff)
                return
            raise err(f"JoinGroup {self.group_id}")
        self.member_id = resp.member_id
        self.generation_id = resp.generation_id
        protocol = resp.protocol_name
        assignments = []
        if resp.leader == resp.member_id and not getattr(resp, "skip_assignment", False):
            assignments = await self._assign(protocol, resp.members)
        # SyncGroup
        sversion = self.pool.version(conn, SyncGroupRequest)
        sreq = SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id,
            group_instance_id=None, protocol_type="consumer", protocol_name=protocol,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in assignments])
        try:
            sresp = await conn.request(sreq, sversion, timeout=self.rebalance_timeout_ms / 1000 + 5)
        except (ConnectionError, asyncio.TimeoutError) as e:
            self._coordinator_dead(node)
            self._rejoin = True
            raise Errors.KafkaConnectionError(f"SyncGroup: {e!r}") from e
        if sresp.error_code:
            self._need_rejoin(sresp.error_code)
            if sresp.error_code in COORDINATOR_ERRORS:
                self._coordinator_dead(node)
            await asyncio.sleep(self.retry_backoff)
            return
        assigned = decode_assignment(sresp.assignment)
        self._parts = {TopicPartition(t, p): PartitionState()
                       for t in sorted(assigned) for p in sorted(assigned[t])}
        self.metadata.add_topics(assigned)
        self._joined_md = self._md_snapshot()
        if self.ordering_barrier:
            self._ordering.arm(self._parts)
        self._joined = True
        loop = asyncio.get_running_loop()
        self._next_heartbeat = loop.time() + self.heartbeat_interval
        await self._call_listener("on_partitions_assigned", set(self._parts))

    async def _join_group(self, conn, node: int):
        """JoinGroup, again with the member id the coordinator gives (KIP-394)."""
        metadata = encode_subscription(self._subscription)
        jversion = self.pool.version(conn, JoinGroupRequest)
        while True:
            req = JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                group_instance_id=None, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=a, metadata=metadata)
                           for a in self.assignors], reason=None)
            try:
                resp = await conn.request(req, jversion,
                                          timeout=self.rebalance_timeout_ms / 1000 + 5)
            except (ConnectionError, asyncio.TimeoutError) as e:
                self._coordinator_dead(node)
                self._rejoin = True
                raise Errors.KafkaConnectionError(f"JoinGroup: {e!r}") from e
            if resp.error_code != Errors.MemberIdRequiredError.errno:
                return resp
            self.member_id = resp.member_id

    async def _assign(self, protocol: str, members) -> list[tuple[str, bytes]]:
        subscriptions = {}
        for m in members:
            topics, _ = decode_subscription(bytes(m.metadata))
            subscriptions[m.member_id] = topics
        all_topics = sorted({t for ts in subscriptions.values() for t in ts})
        partitions = {}
        for t in all_topics:
            try:
                md = await self.metadata.wait_for_topic(t, timeout=5.0, need_leaders=False)
                marked = marked_for_deletion(md)
                partitions[t] = (sorted(p for p in md.partitions if p not in marked), marked)
            except (asyncio.TimeoutError, Errors.KafkaError) as e:
                log.debug("assignor: no metadata for %s: %r", t, e)
        # KIP-253 part 6: undeleted and marked-for-deletion partitions, assigned separately.
        result = split_assign(ASSIGNORS[protocol], subscriptions, partitions)
        return [(m, encode_assignment(result.get(m, {}))) for m in sorted(subscriptions)]

    def _maybe_heartbeat(self, now: float) -> float:
        if self._heartbeat_inflight or self._coordinator is None:
            return self.heartbeat_interval
        if now < self._next_heartbeat:
            return self._next_heartbeat - now
        node = self._coordinator
        conn = self.pool.get_nowait(node)
        if conn is None:
            return 0.05
        self._next_heartbeat = now + self.heartbeat_interval
        self._heartbeat_inflight = True
        version = self.pool.version(conn, HeartbeatRequest)
        fut = conn.send(HeartbeatRequest(group_id=self.group_id, generation_id=self.generation_id,
                                         member_id=self.member_id, group_instance_id=None),
                        version)
        timer = asyncio.get_running_loop().call_later(
            self.pool.request_timeout, lambda: None if fut.done() else conn.close("heartbeat timed out"))
        fut.add_done_callback(lambda f: self._on_heartbeat(node, f, timer))
        return self.heartbeat_interval

    def _on_heartbeat(self, node: int, fut: asyncio.Future, timer) -> None:
        timer.cancel()
        self._heartbeat_inflight = False
        if not fut.cancelled():
            fut.exception()
        if self._closed or self._stopping:
            return
        if fut.cancelled() or fut.exception() is not None:
            self._coordinator_dead(node)
            self._kick()
            return
        code = fut.result().error_code
        if code in REJOIN_ERRORS:
            self._need_rejoin(code)
        elif code in COORDINATOR_ERRORS:
            self._coordinator_dead(node)
            self._kick()
        elif code:
            log.debug("heartbeat error %s", code)

    # ------------------------------------------------------------------ KIP-253: what a rejoin compares
    def _md_snapshot(self) -> dict[str, tuple]:
        out = {}
        for t in self._subscription or ():
            md = self.metadata.topic(t)
            if md is not None and md.partitions and not md.error_code:
                out[t] = (tuple(sorted(md.partitions)), md.undeleted_partition_count)
        return out
