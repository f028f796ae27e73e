"""Admin client: topics, partitions (growing and KIP-253 shrinking), KIP-179 reassignment,
configs, offsets, records, groups, ACLs (client/admin_acls.py).

    admin = Admin("127.0.0.1:9092")
    await admin.create_topics([NewTopic("t", 3, 3, {"retention.ms": "60000"})])
    await admin.create_partitions({"t": 6})      # KIP-253: a lower count marks partitions for deletion
    await admin.close()

Every method takes the highest version both sides speak.  Topic/partition/config requests go to
the controller (any broker would forward them); group requests to the group's coordinator.
Per-item errors: by default the first one raises its `kafka.errors` class; with
`raise_on_error=False` methods return {item: exception or None}.
"""
from __future__ import annotations

import asyncio
import collections
import random
from dataclasses import dataclass, field
from typing import Any, Iterable

import kafka.errors as Errors
from kafka.protocol.admin import (CreatePartitionsRequest, CreateTopicsRequest,
                                  DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
                                  DescribeClusterRequest, DescribeConfigsRequest,
                                  DescribeGroupsRequest, ElectLeadersRequest,
                                  IncrementalAlterConfigsRequest,
                                  ListGroupsRequest)
from kafka.protocol.consumer import (OffsetCommitRequest, OffsetDeleteRequest,
                                     OffsetFetchRequest)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from minibroker.client import scram_admin
from minibroker.client.admin_acls import AclAdmin
from minibroker.client.connection_pool import ConnectionPool
from minibroker.client.lifecycle import PooledClient
from minibroker.client.list_offsets import EARLIEST, LATEST, list_offsets
from minibroker.client.group_protocol import decode_assignment, decode_subscription
from minibroker.client.metadata import ClusterMetadata
from minibroker.client.records import TopicPartition
from minibroker.client.security import ClientSecurity
from minibroker.protocol.errors import for_code
from minibroker.protocol.messages import (AssignPartitionsRequest, AssignPartitionsResponse,
                                          ConsumerGroupDescribeRequest,
                                          ConsumerGroupDescribeResponse,
                                          MetadataResponseKip253,
                                          PartitionAssignmentStatusRequest,
                                          PartitionAssignmentStatusResponse)

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    # Manual placement, {partition: [broker, ...]} (then both counts above stay -1).
    assignments: dict[int, list[int]] = field(default_factory=dict)


def _check(results: dict, raise_on_error: bool) -> dict:
    if raise_on_error:
        for item, exc in results.items():
            if exc is not None:
                raise exc
    return results


def _err(code: int, what: str, message: str | None = None) -> Exception | None:
    if not code:
        return None
    return Errors.for_code(code)(f"{what}: {message}" if message else what)


class Admin(AclAdmin, PooledClient):
    def __init__(self, bootstrap_servers: str | list[str], *, client_id: str = "minibroker-admin",
                 request_timeout_ms: int = 30000, ssl_context: Any = None,
                 security: ClientSecurity | None = None,
                 rng: random.Random | None = None) -> None:
        self.pool = ConnectionPool(bootstrap_servers, client_id, request_timeout_ms,
                                   ssl_context=ssl_context, security=security, rng=rng)
        self.metadata = ClusterMetadata(self.pool, allow_auto_topic_creation=False)
        self.timeout_ms = request_timeout_ms
        self.last_throttle_time_ms = 0

    async def _controller(self) -> int:
        if self.metadata.controller_id < 0:
            await self.metadata.fetch_all()
        if self.metadata.controller_id not in self.metadata.brokers:
            # librdkafka's mock cluster names a controller that is none of its brokers.
            node, _ = await self.pool.any_connection()
            return node
        return self.metadata.controller_id

    async def _to_controller(self, req: Any, lo: int = 0, hi: int | None = None) -> Any:
        node = await self._controller()
        try:
            return await self.pool.request(node, req, lo=lo, hi=hi)
        except (ConnectionError, asyncio.TimeoutError, Errors.KafkaConnectionError):
            self.metadata.controller_id = -1
            node, conn = await self.pool.any_connection()
            return await self.pool.request(node, req, lo=lo, hi=hi)

    # ------------------------------------------------------------------ topics
    async def list_topics(self) -> dict[str, int]:
        """{topic: partition count} for every non-internal topic."""
        resp = await self.metadata.fetch_all()
        return {t.name: len(t.partitions) for t in resp.topics
                if not t.error_code and not t.is_internal}

    async def describe_topics(self, topics: Iterable[str]):
        """Topic metadata (KIP-253 counts included), refreshed now."""
        topics = list(topics)
        await self.metadata.refresh(topics)
        return {t: self.metadata.topic(t) for t in topics}

    async def create_topics(self, topics: Iterable[NewTopic | tuple], validate_only: bool = False,
                            raise_on_error: bool = True) -> dict:
        T = CreateTopicsRequest.CreatableTopic
        items = [t if isinstance(t, NewTopic) else NewTopic(*t) for t in topics]
        req = CreateTopicsRequest(topics=[T(
            name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
            assignments=[T.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                         for p, b in sorted(t.assignments.items())], configs=[T.CreatableTopicConfig(name=k, value=v)
                                     for k, v in sorted(t.configs.items())]) for t in items],
            timeout_ms=self.timeout_ms, validate_only=validate_only)
        resp = await self._to_controller(req)
        return _check({t.name: _err(t.error_code, f"create topic {t.name}",
                                    getattr(t, "error_message", None)) for t in resp.topics},
                      raise_on_error)

    async def delete_topics(self, topics: Iterable[str], raise_on_error: bool = True) -> dict:
        topics = list(topics)
        node = await self._controller()
        conn = await self.pool.get(node)
        version = self.pool.version(conn, DeleteTopicsRequest)
        if version >= 6:
            req = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=t)
                                              for t in topics], timeout_ms=self.timeout_ms)
        else:
            req = DeleteTopicsRequest(topic_names=topics, timeout_ms=self.timeout_ms)
        resp = await conn.request(req, version, timeout=self.pool.request_timeout)
        return _check({r.name: _err(r.error_code, f"delete topic {r.name}")
                       for r in resp.responses}, raise_on_error)

    async def create_partitions(self, counts: dict[str, int], validate_only: bool = False,
                                raise_on_error: bool = True,
                                assignments: dict[str, list[list[int]]] | None = None) -> dict:
        """Set each topic's partition count; lower than now = KIP-253 deletion. `assignments`:
        the new partitions' replicas, per topic. The response's throttle_time_ms (KIP-599: how
        long to wait before mutating again) is kept in `last_throttle_time_ms`."""
        P = CreatePartitionsRequest.CreatePartitionsTopic
        placed = assignments or {}
        req = CreatePartitionsRequest(topics=[P(
            name=t, count=n, assignments=[P.CreatePartitionsAssignment(broker_ids=list(b))
                                          for b in placed[t]] if t in placed else None)
            for t, n in counts.items()],
            timeout_ms=self.timeout_ms, validate_only=validate_only)
        resp = await self._to_controller(req)
        self.last_throttle_time_ms = resp.throttle_time_ms
        return _check({r.name: _err(r.error_code, f"create partitions {r.name}",
                                    r.error_message) for r in resp.results}, raise_on_error)

    # ------------------------------------------------------------------ reassignment
    async def assign_partitions(self, targets: dict[TopicPartition, list[int]],
                                raise_on_error: bool = True) -> tuple[int, dict]:
        """KIP-179: start moving each partition to the given brokers (preferred leader first).
        Returns (request id, {(TopicPartition, broker): exception or None}); the move goes on
        in the cluster: follow it with partition_assignment_status(request id)."""
        A = AssignPartitionsRequest.PartitionAssignment
        req = AssignPartitionsRequest(timeout_ms=self.timeout_ms, assignments=[
            A(topic=tp.topic, partition=tp.partition, brokers=list(b)) for tp, b in targets.items()])
        resp = await self._private(req, AssignPartitionsResponse)
        results = {(TopicPartition(r.topic, r.partition), r.broker): _err(
            r.error_code, f"assign {r.topic}-{r.partition} to broker {r.broker}")
            for r in resp.results}
        if resp.error_code and raise_on_error:
            raise for_code(resp.error_code)(resp.error_message or "assign partitions")
        return resp.request_id, _check(results, raise_on_error)

    async def partition_assignment_status(self, request_id: int = -1) -> tuple[int, dict]:
        """(request id, {(TopicPartition, broker): (error code, numerator, denominator)}); error
        PARTITION_REASSIGNMENT_IN_PROGRESS while that replica is still being moved, 0 once done.
        -1: the most recent request."""
        resp = await self._private(PartitionAssignmentStatusRequest(request_id=request_id),
                                   PartitionAssignmentStatusResponse)
        if resp.error_code:
            raise for_code(resp.error_code)(f"reassignment request {request_id}")
        return resp.request_id, {(TopicPartition(r.topic, r.partition), r.broker):
                                 (r.error_code, r.numerator, r.denominator) for r in resp.replicas}

    async def _private(self, req: Any, response_class: Any) -> Any:
        """A request of our own API keys (v0), through any broker: it forwards to the controller."""
        node, conn = await self.pool.any_connection()
        try:
            return await conn.request(req, 0, timeout=self.pool.request_timeout,
                                      response_class=response_class)
        except Exception:
            self.pool.close_node(node, f"{type(req).__name__} failed")
            raise

    # ------------------------------------------------------------------ configs
    async def describe_configs(self, resources: Iterable[tuple[int, str]] | None = None, *,
                               topics: Iterable[str] = (), brokers: Iterable[int] = (),
                               ) -> dict[tuple[int, str], dict[str, str | None]]:
        res = list(resources or []) + [(TOPIC, t) for t in topics] + \
            [(BROKER, str(b)) for b in brokers]
        req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=rt, resource_name=name, configuration_keys=None) for rt, name in res],
            include_synonyms=False, include_documentation=False)
        resp = await self._to_controller(req)
        out = {}
        for r in resp.results:
            if r.error_code:
                raise _err(r.error_code, f"describe configs {r.resource_name}", r.error_message)
            out[(r.resource_type, r.resource_name)] = {c.name: c.value for c in r.configs}
        return out

    async def describe_config_entries(self, resources: Iterable[tuple[int, str]],
                                      synonyms: bool = False) -> dict[tuple[int, str], list]:
        """{(type, name): DescribeConfigs entries (name, value, config_source, is_sensitive,
        synonyms ...)}; a broker's own configs are asked of that broker, as Kafka's Admin does."""
        R = DescribeConfigsRequest.DescribeConfigsResource
        out = {}
        for rt, name in resources:
            req = DescribeConfigsRequest(resources=[R(resource_type=rt, resource_name=name,
                                                      configuration_keys=None)],
                                         include_synonyms=synonyms, include_documentation=False)
            if rt == BROKER and name.isdigit():
                if not self.metadata.brokers:
                    await self.metadata.fetch_all()
                resp = await self.pool.request(int(name), req, lo=1)
            else:
                resp = await self._to_controller(req, lo=1)
            r = resp.results[0]
            if r.error_code:
                raise _err(r.error_code, f"describe configs {name or '<default>'}",
                           r.error_message)
            out[(rt, name)] = list(r.configs)
        return out

    async def partition_counts_by_broker(self, topic: str) -> dict[int, tuple[int, int]]:
        """{broker: (partitions it lists, KIP-253 undeleted count or -1)} for `topic`, asking
        every broker for its own metadata (each learns the controller's changes on its own)."""
        if not self.metadata.brokers:
            await self.metadata.fetch_all()
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                              allow_auto_topic_creation=False,
                              include_cluster_authorized_operations=False,
                              include_topic_authorized_operations=False)
        out = {}
        for node in sorted(self.metadata.brokers):
            conn = await self.pool.get(node)
            version = self.pool.version(conn, MetadataRequest, hi=12)
            resp = await conn.request(req, version, timeout=self.pool.request_timeout,
                                      response_class=MetadataResponseKip253)
            t = resp.topics[0]
            out[node] = (len(t.partitions), getattr(t, "undeleted_partition_count", -1))
        return out

    async def alter_configs(self, changes: dict[tuple[int, str], dict[str, tuple[int, str | None] | str | None]],
                            validate_only: bool = False, raise_on_error: bool = True) -> dict:
        """Incremental: {(type, name): {config: value | None (delete) | (op, value)}}."""
        R = IncrementalAlterConfigsRequest.AlterConfigsResource
        resources = []
        for (rt, name), cfg in changes.items():
            entries = []
            for k, v in sorted(cfg.items()):
                op, value = v if isinstance(v, tuple) else ((DELETE, None) if v is None else (SET, v))
                entries.append(R.AlterableConfig(name=k, config_operation=op, value=value))
            resources.append(R(resource_type=rt, resource_name=name, configs=entries))
        resp = await self._to_controller(IncrementalAlterConfigsRequest(
            resources=resources, validate_only=validate_only))
        return _check({(r.resource_type, r.resource_name): _err(
            r.error_code, f"alter configs {r.resource_name}", r.error_message)
            for r in resp.responses}, raise_on_error)

    # ------------------------------------------------------------------ offsets and records
    async def list_offsets(self, specs: dict[TopicPartition, int | str]) -> dict[TopicPartition, tuple[int, int]]:
        """{tp: 'earliest' | 'latest' | timestamp_ms | -2 | -1 ...} -> {tp: (offset, timestamp)}."""
        named = {"earliest": EARLIEST, "latest": LATEST}
        return await list_offsets(self.pool, self.metadata,
                                  {TopicPartition(*tp): named.get(s, s) for tp, s in specs.items()},
                                  timeout=self.pool.request_timeout)

    async def delete_records(self, before: dict[TopicPartition, int],
                             raise_on_error: bool = True) -> dict:
        """Advance each partition's log start offset to `before[tp]` (-1: the high watermark)."""
        by_node: dict[int, dict[str, list]] = collections.defaultdict(lambda: collections.defaultdict(list))
        for tp, off in before.items():
            tp = TopicPartition(*tp)
            if self.metadata.topic(tp.topic) is None:
                await self.metadata.wait_for_topic(tp.topic, timeout=self.pool.request_timeout)
            by_node[self.metadata.leader(tp.topic, tp.partition)][tp.topic].append(
                DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(
                    partition_index=tp.partition, offset=off))
        out: dict = {}
        for node, topics in by_node.items():
            req = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                name=n, partitions=ps) for n, ps in topics.items()], timeout_ms=self.timeout_ms)
            resp = await self.pool.request(node, req)
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = _err(p.error_code, f"delete records {tp}") or p.low_watermark
        if raise_on_error:
            for v in out.values():
                if isinstance(v, Exception):
                    raise v
        return out

    async def elect_leaders(self, election_type: int, partitions: Iterable[TopicPartition] | None
                            ) -> dict[TopicPartition, Exception | None]:
        """ElectLeaders (KIP-183/460): 0 preferred, 1 unclean; None = every partition that needs
        one. {tp: None (elected) or the error, ElectionNotNeededError included}."""
        by_topic: dict[str, list[int]] = collections.defaultdict(list)
        for tp in partitions or []:
            by_topic[tp.topic].append(tp.partition)
        req = ElectLeadersRequest(election_type=election_type, timeout_ms=self.timeout_ms,
                                  topic_partitions=None if partitions is None else [
                                      ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps)
                                      for t, ps in sorted(by_topic.items())])
        resp = await self._to_controller(req, lo=1)
        if getattr(resp, "error_code", 0):
            raise _err(resp.error_code, "elect leaders")
        return {TopicPartition(r.topic, p.partition_id):
                _err(p.error_code, f"elect leader {r.topic}-{p.partition_id}", p.error_message)
                for r in resp.replica_election_results for p in r.partition_result}

    # ------------------------------------------------------------------ groups
    async def _coordinator(self, group: str) -> int:
        node, conn = await self.pool.any_connection()
        version = self.pool.version(conn, FindCoordinatorRequest)
        for _ in range(50):
            if version >= 4:
                resp = await conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
                                          version)
                c = resp.coordinators[0]
                code, cid, host, port = c.error_code, c.node_id, c.host, c.port
            else:
                resp = await conn.request(FindCoordinatorRequest(key=group, key_type=0), version)
                code, cid, host, port = resp.error_code, resp.node_id, resp.host, resp.port
            if code == 0:
                self.pool.update_addresses({cid: (host, port)})
                return cid
            if not Errors.for_code(code).retriable:
                raise Errors.for_code(code)(f"FindCoordinator {group}")
            await asyncio.sleep(0.1)
        raise Errors.CoordinatorNotAvailableError(group)

    async def list_groups(self) -> dict[str, str]:
        """{group id: protocol type} over every broker."""
        await self.metadata.fetch_all()
        out: dict[str, str] = {}
        for node in sorted(self.metadata.brokers):
            conn = await self.pool.get(node)
            version = self.pool.version(conn, ListGroupsRequest)
            resp = await conn.request(ListGroupsRequest(states_filter=[], types_filter=[]),
                                      version)
            if resp.error_code:
                raise _err(resp.error_code, f"list groups on {node}")
            for g in resp.groups:
                out[g.group_id] = g.protocol_type
        return dict(sorted(out.items()))

    async def describe_groups(self, groups: Iterable[str]) -> dict[str, dict]:
        out = {}
        for group in groups:
            node = await self._coordinator(group)
            # hi=2: our broker's k15 fails to encode authorized_operations (v3+) as of ad53ea5.
            resp = await self.pool.request(node, DescribeGroupsRequest(
                groups=[group], include_authorized_operations=False), hi=2)
            g = resp.groups[0]
            if g.error_code:
                raise _err(g.error_code, f"describe group {group}")
            members = []
            for m in g.members:
                topics, assignment = [], {}
                if g.protocol_type == "consumer":
                    try:
                        topics, _ = decode_subscription(bytes(m.member_metadata))
                        assignment = decode_assignment(bytes(m.member_assignment))
                    except Exception:  # noqa: BLE001 - not the consumer protocol after all
                        pass
                members.append(dict(member_id=m.member_id, client_id=m.client_id,
                                    client_host=m.client_host, subscription=topics,
                                    assignment=assignment))
            out[group] = dict(state=g.group_state, protocol_type=g.protocol_type,
                              protocol=g.protocol_data, members=members)
        return out

    async def list_groups_typed(self) -> dict[str, tuple[str, str, str]]:
        """{group id: (protocol type, state, group type "classic" | "consumer")} (ListGroups v5)."""
        await self.metadata.fetch_all()
        out: dict[str, tuple[str, str, str]] = {}
        for node in sorted(self.metadata.brokers):
            resp = await self.pool.request(node, ListGroupsRequest(states_filter=[],
                                                                   types_filter=[]), lo=5)
            if resp.error_code:
                raise _err(resp.error_code, f"list groups on {node}")
            for g in resp.groups:
                out[g.group_id] = (g.protocol_type, g.group_state, g.group_type)
        return dict(sorted(out.items()))

    async def describe_consumer_groups(self, groups: Iterable[str]) -> dict[str, dict]:
        """KIP-848 groups (ConsumerGroupDescribe): state, epochs and each member's current
        assignment as {topic: [partitions]}."""
        out = {}
        for group in groups:
            node = await self._coordinator(group)
            resp = await self.pool.request(node, ConsumerGroupDescribeRequest(
                group_ids=[group], include_authorized_operations=False),
                response_class=ConsumerGroupDescribeResponse)
            g = resp.groups[0]
            if g.error_code:
                raise _err(g.error_code, f"describe group {group}", g.error_message)
            out[group] = dict(state=g.group_state, group_epoch=g.group_epoch,
                              assignment_epoch=g.assignment_epoch, assignor=g.assignor_name,
                              members=[dict(member_id=m.member_id, client_id=m.client_id,
                                            client_host=m.client_host,
                                            member_epoch=m.member_epoch,
                                            subscription=list(m.subscribed_topic_names),
                                            assignment={tp.topic_name: list(tp.partitions)
                                                        for tp in m.assignment.topic_partitions})
                                       for m in g.members])
        return out

    async def list_group_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of `group` (OffsetFetch, topics null)."""
        node = await self._coordinator(group)
        conn = await self.pool.get(node)
        version = self.pool.version(conn, OffsetFetchRequest, lo=2)
        if version >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            req = OffsetFetchRequest(groups=[G(group_id=group, member_id=None, member_epoch=-1,
                                               topics=None)], require_stable=False)
        else:
            req = OffsetFetchRequest(group_id=group, topics=None, require_stable=False)
        resp = await conn.request(req, version, timeout=self.pool.request_timeout)
        code, topics = (resp.groups[0].error_code, resp.groups[0].topics) if version >= 8 \
            else (resp.error_code, resp.topics)
        if code:
            raise _err(code, f"fetch offsets of group {group}")
        return {TopicPartition(t.name, p.partition_index): p.committed_offset   # mock: null
                for t in topics or () for p in t.partitions if p.committed_offset >= 0}

    async def alter_group_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """Commit `offsets` for `group` from outside it (generation -1, no member): the group
        must be empty, as for Kafka's AdminClient.alterConsumerGroupOffsets."""
        node = await self._coordinator(group)
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        topics: dict[str, list] = collections.defaultdict(list)
        for tp, off in sorted(offsets.items()):
            topics[tp.topic].append(T.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=off, committed_leader_epoch=-1,
                commit_timestamp=-1, committed_metadata=""))
        resp = await self.pool.request(node, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, retention_time_ms=-1,
            topics=[T(name=n, partitions=ps) for n, ps in topics.items()]), lo=2, hi=9)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise _err(p.error_code, f"commit offset of {t.name}-{p.partition_index}")

    async def delete_group_offsets(self, group: str, partitions: Iterable[TopicPartition]
                                   ) -> tuple[Exception | None, dict]:
        """OffsetDelete (KIP-496): (the group-level error or None, {tp: error or None})."""
        by_topic: dict[str, list[int]] = collections.defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        O = OffsetDeleteRequest.OffsetDeleteRequestTopic
        node = await self._coordinator(group)
        resp = await self.pool.request(node, OffsetDeleteRequest(group_id=group, topics=[
            O(name=t, partitions=[O.OffsetDeleteRequestPartition(partition_index=p)
                                  for p in sorted(ps)]) for t, ps in sorted(by_topic.items())]))
        return (_err(resp.error_code, f"delete offsets of group {group}"),
                {TopicPartition(t.name, p.partition_index): _err(
                    p.error_code, f"delete offset {t.name}-{p.partition_index}")
                 for t in resp.topics for p in t.partitions})

    async def delete_groups(self, groups: Iterable[str], raise_on_error: bool = True) -> dict:
        out = {}
        for group in groups:
            node = await self._coordinator(group)
            resp = await self.pool.request(node, DeleteGroupsRequest(groups_names=[group]))
            for r in resp.results:
                out[r.group_id] = _err(r.error_code, f"delete group {r.group_id}")
        return _check(out, raise_on_error)

    # ------------------------------------------------------------------ users (KIP-554)
    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                              ) -> dict[str, Any]:
        """{user: [(mechanism, iterations)], or the error for that user}; None: every user."""
        return scram_admin.describe_results(await self._to_controller(
            scram_admin.describe_request(None if users is None else list(users))))

    async def alter_user_scram_credentials(self, upsertions: Iterable[tuple] = (),
                                           deletions: Iterable[tuple[str, str]] = (),
                                           raise_on_error: bool = True) -> dict:
        """upsertions: (user, "SCRAM-SHA-256", password[, iterations]); deletions: (user,
        mechanism). The password is salted and hashed here. {user: None or the error}."""
        resp = await self._to_controller(scram_admin.alter_request(upsertions, deletions))
        return _check(scram_admin.alter_results(resp), raise_on_error)

    async def describe_cluster(self) -> dict:
        node, conn = await self.pool.any_connection()
        try:
            version = self.pool.version(conn, DescribeClusterRequest)
        except Errors.UnsupportedVersionError:
            resp = await self.metadata.fetch_all()
            return dict(cluster_id=resp.cluster_id, controller_id=resp.controller_id,
                        brokers={b.node_id: (b.host, b.port, b.rack) for b in resp.brokers})
        resp = await conn.request(DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1,
            include_fenced_brokers=False), version)
        if resp.error_code:
            raise _err(resp.error_code, "describe cluster", resp.error_message)
        return dict(cluster_id=resp.cluster_id, controller_id=resp.controller_id,
                    brokers={b.broker_id: (b.host, b.port, b.rack) for b in resp.brokers})
