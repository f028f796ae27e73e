"""Sends the brokers what changed: LeaderAndIsr, then UpdateMetadata, then StopReplica.

Real encoded requests over a KafkaClientConnection per broker — the same network layer and fault
hooks as client traffic. The order matters for KIP-253: a broker must enforce a new undeleted
partition count (LeaderAndIsr) before any client can learn it (UpdateMetadata).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable, Mapping, Sequence

from minibroker.controller.delta import MetadataDelta
from minibroker.controller.image import BrokerRegistration, MetadataImage, TopicImage
from minibroker.network.client import KafkaClientConnection
from minibroker.network.partitions import NetworkPartitions
from minibroker.protocol.messages import (LeaderAndIsrRequest, StopReplicaRequest,
                                          UpdateMetadataRequest)

log = logging.getLogger("minibroker.propagator")

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
LEADER_DURING_DELETE = -2          # UpdateMetadata marks a deleted topic's partitions so

_LTopic = LeaderAndIsrRequest.LeaderAndIsrTopicState
_LPart = _LTopic.LeaderAndIsrPartitionState
_UTopic = UpdateMetadataRequest.UpdateMetadataTopicState
_UPart = _UTopic.UpdateMetadataPartitionState
_UBroker = UpdateMetadataRequest.UpdateMetadataBroker
_UConfig = UpdateMetadataRequest.BrokerConfig
_UAcl = UpdateMetadataRequest.AclEntry
_UEndpoint = _UBroker.UpdateMetadataEndpoint
_STopic = StopReplicaRequest.StopReplicaTopicState
_SPart = _STopic.StopReplicaPartitionState

# The requests' structs are kafka-python data classes (untyped: Any); a stop is (topic,
# partition, delete).
Stop = tuple[str, int, bool]


def _control_port(b: BrokerRegistration) -> int:
    """The controller talks to a broker on its control-plane listener (KIP-291), which alone
    serves LeaderAndIsr, StopReplica and UpdateMetadata."""
    return b.control_port if b.control_port > 0 else b.port


def _epochs(cls: Any, pairs: Iterable[tuple[int, int]]) -> list[Any]:
    return [cls(partition_index=k, leader_epoch=v) for k, v in pairs]


def _acls(image: MetadataImage) -> list[Any]:
    """Every ACL, in a defined order (UpdateMetadata's tagged Acls)."""
    return [_UAcl(resource_type=int(a.resource_type), resource_name=a.resource_name,
                  pattern_type=int(a.pattern_type), principal=a.principal, host=a.host,
                  operation=int(a.operation), permission_type=int(a.permission_type))
            for a in sorted(image.acls.values())]


def _configs(cls: Any, configs: Mapping[str, str]) -> list[Any]:
    return [cls(name=k, value=v) for k, v in sorted(configs.items())]


# Partitions per LeaderAndIsr or UpdateMetadata request, and built per turn of the loop: encoding,
# decoding and applying 10,000 partition states at once held the shared event loop for 0.3-0.9 s
# (every broker, every client); each chunk is a request, so the loop turns between them. A topic
# may be split across chunks (each carries the topic-level fields; UpdateMetadata marks all but
# the last piece MorePartitions, and the broker applies the topic whole once the last arrived).
CHUNK_PARTITIONS = 100           # ~0.1 ms each to encode, ~0.2 ms to decode and apply


def _chunks(topics: list[Any], piece: Callable[[Any, list[Any], bool], Any]) -> list[list[Any]]:
    """`topics` (each with partition_states) cut into requests of at most CHUNK_PARTITIONS
    partitions; piece(topic, states, last) is a topic carrying only `states`."""
    out: list[list[Any]] = []
    cur: list[Any] = []
    n = 0
    for t in topics:
        parts = t.partition_states
        for i in range(0, max(len(parts), 1), CHUNK_PARTITIONS):
            states = parts[i:i + CHUNK_PARTITIONS]
            if n + len(states) > CHUNK_PARTITIONS and cur:
                out.append(cur)
                cur, n = [], 0
            cur.append(t if len(states) == len(parts)
                       else piece(t, states, i + CHUNK_PARTITIONS >= len(parts)))
            n += len(states)
    if cur:
        out.append(cur)
    return out


def _lai_piece(t: Any, states: list[Any], last: bool) -> Any:
    return _LTopic(topic_name=t.topic_name, topic_id=t.topic_id, partition_states=states,
                   undeleted_partition_count=t.undeleted_partition_count, configs=t.configs)


def _um_piece(t: Any, states: list[Any], last: bool) -> Any:
    return _UTopic(topic_name=t.topic_name, topic_id=t.topic_id, partition_states=states,
                   initial_partition_count=t.initial_partition_count,
                   undeleted_partition_count=t.undeleted_partition_count, configs=t.configs,
                   more_partitions=not last)


class _Pace:
    """Counts the partition states built; due() once CHUNK_PARTITIONS were built since the last
    time it said so (the caller then lets the loop turn), across topics of any size."""
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def due(self, n: int = 1) -> bool:
        self.n += n
        if self.n < CHUNK_PARTITIONS:
            return False
        self.n = 0
        return True


class Propagator:
    """One per controller: its id and epoch stamp every request it sends."""

    def __init__(self, controller_id: int, controller_epoch: int,
                 network: NetworkPartitions | None = None, request_timeout_s: float = 30.0
                 ) -> None:
        """request_timeout_s: how long a broker may take to answer (connecting included)
        before it is given up: a broker stopped but not yet fenced (serve --processes) would
        otherwise hold every commit, and a new controller's start."""
        self.controller_id = controller_id
        self.request_timeout_s = request_timeout_s
        self.network = network if network is not None else NetworkPartitions()
        self.controller_epoch = controller_epoch
        self._conns: dict[int, KafkaClientConnection] = {}

    async def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    # ------------------------------------------------------------------ diffing
    async def full_sync(self, image: MetadataImage) -> None:
        """After a controller change: every live broker gets the whole state."""
        names = sorted(image.topics)
        await self._send(image, {b.broker_id for b in image.live_brokers()}, names, names, {})

    async def propagate(self, old: MetadataImage, new: MetadataImage,
                        delta: MetadataDelta) -> None:
        live = {b.broker_id for b in new.live_brokers()}
        changed = sorted(delta.changed_topics)
        lai_topics = []
        stops: dict[int, list[Stop]] = {}
        for name in changed:
            o, n = old.topics.get(name), new.topics.get(name)
            if o is not None and (n is None or n.topic_id != o.topic_id):
                for pid, p in sorted(o.partitions.items()):
                    for r in p.replicas:
                        stops.setdefault(r, []).append((name, pid, True))
            if n is None:
                continue
            for pid, p in sorted(o.partitions.items() if o and o.topic_id == n.topic_id else ()):
                np = n.partitions.get(pid)
                removed = set(p.replicas) - set(np.replicas if np else ())
                for r in sorted(removed):
                    stops.setdefault(r, []).append((name, pid, True))
            lai_topics.append(name)
        # Newly registered / unfenced brokers need everything they host and all metadata, and so
        # does one registering again unfenced (a new process: serve --processes --data-dir
        # started again, where the log still has the last run's registrations).
        fresh = sorted(b for b in delta.changed_brokers
                       if b in live and (b not in old.brokers or old.brokers[b].fenced
                                         or old.brokers[b].broker_epoch
                                         != new.brokers[b].broker_epoch))
        if fresh:
            await self._send(new, set(fresh), sorted(new.topics), sorted(new.topics), {})
        if (lai_topics or stops or delta.changed_brokers or delta.broker_configs_changed
                or delta.acls is not None or delta.scram_changed):
            await self._send(new, live, lai_topics, changed, stops, removed=old)

    # ------------------------------------------------------------------ sending
    async def _send(self, image: MetadataImage, brokers: set[int], lai_topics: list[str],
                    um_topics: list[str], stops: dict[int, list[Stop]],
                    removed: MetadataImage | None = None) -> None:
        lai: dict[int, list[Any]] = {}
        pace = _Pace()
        for name in lai_topics:
            t = image.topics.get(name)
            if t is None:
                continue
            per_broker: dict[int, list[Any]] = {}
            for pid, p in t.partitions.items():
                if pace.due():
                    await asyncio.sleep(0)          # building 10,000 states takes ~0.5 s
                for r in p.replicas:
                    if r in brokers:
                        per_broker.setdefault(r, []).append(_LPart(
                            partition_index=pid, controller_epoch=self.controller_epoch,
                            leader=p.leader, leader_epoch=p.leader_epoch, isr=list(p.isr),
                            partition_epoch=p.partition_epoch, replicas=list(p.replicas),
                            adding_replicas=list(p.adding_replicas),
                            removing_replicas=list(p.removing_replicas), is_new=False,
                            leader_recovery_state=0,
                            leader_epoch_after_creation=_epochs(
                                _LPart.PartitionLeaderEpochAfterCreation,
                                p.leader_epoch_after_creation),
                            leader_epoch_before_deletion=_epochs(
                                _LPart.PartitionLeaderEpochBeforeDeletion,
                                p.leader_epoch_before_deletion)))
            for r, parts in per_broker.items():
                lai.setdefault(r, []).append(_LTopic(
                    topic_name=name, topic_id=t.topic_id, partition_states=parts,
                    undeleted_partition_count=t.undeleted_partition_count,
                    configs=_configs(_LTopic.TopicConfig, t.configs)))
        um_states = []
        for name in um_topics:
            t = await self._um_topic(image, name, removed, pace)
            if t is not None:
                um_states.append(t)
        live_brokers = [_UBroker(id=b.broker_id, endpoints=[
            _UEndpoint(port=p, host=h, listener=name, security_protocol=proto)
            for name, h, p, proto in b.listeners or (("PLAINTEXT", b.host, b.port, 0),)],
            rack=b.rack) for b in image.live_brokers()]
        await asyncio.gather(*(self._send_one(r, lai.get(r), um_states, live_brokers,
                                              stops.get(r), image)
                               for r in sorted(brokers | set(stops))))

    async def _um_topic(self, image: MetadataImage, name: str, removed: MetadataImage | None,
                        pace: _Pace) -> Any:
        """The topic's UpdateMetadata state, built CHUNK_PARTITIONS partitions per turn of the
        loop; a deleted topic's partitions are marked LEADER_DURING_DELETE."""
        t: TopicImage | None = image.topics.get(name)
        old = removed.topics.get(name) if t is None and removed is not None else None
        src = t if t is not None else old
        if src is None:
            return None
        items = sorted(src.partitions.items())
        live = {b.broker_id for b in image.live_brokers()}
        parts = []
        for i in range(0, len(items), CHUNK_PARTITIONS):
            if pace.due(len(items[i:i + CHUNK_PARTITIONS])):
                await asyncio.sleep(0)
            if t is None:
                parts += [_UPart(partition_index=pid, controller_epoch=self.controller_epoch,
                                 leader=LEADER_DURING_DELETE, leader_epoch=p.leader_epoch, isr=[],
                                 zk_version=0, replicas=[], offline_replicas=[])
                          for pid, p in items[i:i + CHUNK_PARTITIONS]]
                continue
            parts += [_UPart(
                partition_index=pid, controller_epoch=self.controller_epoch, leader=p.leader,
                leader_epoch=p.leader_epoch, isr=list(p.isr), zk_version=p.partition_epoch,
                replicas=list(p.replicas),
                offline_replicas=[r for r in p.replicas if r not in live],
                partition_epoch=p.partition_epoch,
                leader_epoch_after_creation=_epochs(_UPart.PartitionLeaderEpochAfterCreation,
                                                    p.leader_epoch_after_creation),
                leader_epoch_before_deletion=_epochs(_UPart.PartitionLeaderEpochBeforeDeletion,
                                                     p.leader_epoch_before_deletion))
                for pid, p in items[i:i + CHUNK_PARTITIONS]]
        if t is None:
            return _UTopic(topic_name=name, topic_id=src.topic_id, partition_states=parts)
        return _UTopic(topic_name=name, topic_id=t.topic_id, partition_states=parts,
                       initial_partition_count=t.initial_partition_count,
                       undeleted_partition_count=t.undeleted_partition_count,
                       configs=_configs(_UTopic.TopicConfig, t.configs))

    async def _send_one(self, broker_id: int, lai_topics: list[Any] | None, um_states: list[Any],
                        live_brokers: list[Any], stops: Sequence[Stop] | None,
                        image: MetadataImage) -> None:
        b = image.brokers.get(broker_id)
        if b is None or b.fenced:
            return
        common = dict(controller_id=self.controller_id, is_k_raft_controller=False,
                      controller_epoch=self.controller_epoch, broker_epoch=b.broker_epoch)
        try:
            conn = await asyncio.wait_for(self._conn(broker_id, b.host, _control_port(b)),
                                          self.request_timeout_s)
            for chunk in _chunks(lai_topics or [], _lai_piece):
                await conn.request(LeaderAndIsrRequest(
                    request_type=0, topic_states=chunk, live_leaders=[], **common),
                    LEADER_AND_ISR_VERSION, timeout=self.request_timeout_s)
            configs = [_UConfig(resource_name=n, name=k, value=v)
                       for n, cs in image.broker_configs.items() for k, v in sorted(cs.items())]
            acls = _acls(image)
            for chunk in _chunks(um_states, _um_piece) or [[]]:
                await conn.request(UpdateMetadataRequest(
                    request_type=0, topic_states=chunk, live_brokers=live_brokers,
                    max_partition_epoch=image.max_partition_epoch, broker_configs=configs,
                    acls=acls, scram_credentials=_scram(image), metadata_offset=image.offset,
                    **common),
                    UPDATE_METADATA_VERSION, timeout=self.request_timeout_s)
            stopping = stops or ()
            for i in range(0, len(stopping), CHUNK_PARTITIONS):
                by_topic: dict[str, list[Any]] = {}
                for name, pid, delete in stopping[i:i + CHUNK_PARTITIONS]:
                    by_topic.setdefault(name, []).append(
                        _SPart(partition_index=pid, leader_epoch=-1, delete_partition=delete))
                await conn.request(StopReplicaRequest(topic_states=[
                    _STopic(topic_name=n, partition_states=ps) for n, ps in by_topic.items()],
                    **common), STOP_REPLICA_VERSION, timeout=self.request_timeout_s)
        except Exception as e:  # noqa: BLE001 — the broker is down; it gets a full sync on return
            log.info("controller: broker %d unreachable: %r", broker_id, e)
            c = self._conns.pop(broker_id, None)
            if c is not None:
                c.close()

    async def connection(self, b: BrokerRegistration) -> KafkaClientConnection:
        return await self._conn(b.broker_id, b.host, _control_port(b))

    async def _conn(self, broker_id: int, host: str, port: int) -> KafkaClientConnection:
        c = self._conns.get(broker_id)
        if c is None or c.closed:
            c = await self.network.connect(self.controller_id, broker_id, host, port,
                                           client_id="controller", timeout=5,
                                           control_plane=True)
            self._conns[broker_id] = c
        return c


def _scram(image: MetadataImage) -> list[Any]:
    """Every SCRAM credential, for UpdateMetadata's ScramCredentials (brokers authenticate with
    the credentials the controller last told them)."""
    cls = UpdateMetadataRequest.ScramCredential
    return [cls(name=user, mechanism=mech, salt=c.salt, stored_key=c.stored_key,
                server_key=c.server_key, iterations=c.iterations)
            for (user, mech), c in image.scram_credentials.items()]
