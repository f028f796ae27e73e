"""KIP-848 consumer groups with librdkafka (`group.protocol=consumer`) and KIP-1101's bump rule.

An in-process `ThreadedCluster` (3 brokers in racks r1-r3) so the test can drive it: three
confluent-kafka consumers (client.rack r1-r3) share a 6-partition topic, consume and commit; then
- CreatePartitions to 9 (AdminClient) -> exactly one group epoch bump, the new partitions are
  assigned and consumed;
- leaders move (ElectLeaders through the controller) -> no bump;
- a broker that does not coordinate the group restarts with broker.rack r9 -> exactly one bump.
The group epoch is read with ConsumerGroupDescribe over the wire; the MetadataHash from the
coordinator object. Heartbeat interval 300 ms (server side, group.consumer.heartbeat.interval.ms).
"""
from __future__ import annotations

import threading
import time

import pytest

from conformance.conftest import selected_clients

if "confluent" not in selected_clients():   # opted out; installed or not, the test is skipped
    pytest.skip("confluent not selected (MINIBROKER_CLIENTS)", allow_module_level=True)
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions  # noqa: E402

from conformance.rdlog import LOG  # noqa: E402
from minibroker.network.client import KafkaClientConnection  # noqa: E402
from minibroker.protocol.messages import ConsumerGroupDescribeRequest  # noqa: E402
from minibroker.testing import ThreadedCluster  # noqa: E402

TOPIC = "kip848"
GROUP = "kip848-group"
SETTLE_S = 2.0          # several heartbeat intervals: long enough for a wrong bump to show


class Member:
    def __init__(self, bs: str, name: str, rack: str) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.got: set[tuple[int, int]] = set()
        self.assignment: set[int] = set()
        self.errors: list = []
        self.stopping = threading.Event()
        self.consumer = Consumer({
            "bootstrap.servers": bs, "client.id": f"kip848-{name}", "group.id": GROUP,
            "group.protocol": "consumer", "client.rack": rack,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 100, "logger": LOG})
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        c = self.consumer
        try:
            c.subscribe([TOPIC])
            while not self.stopping.is_set():
                msgs = c.consume(num_messages=500, timeout=0.1)
                with self.lock:
                    self.assignment = {tp.partition for tp in c.assignment()}
                seen = []
                for m in msgs:
                    if m.error():
                        continue
                    seen.append((m.partition(), m.offset()))
                if seen:
                    with self.lock:
                        self.got.update(seen)
                    last: dict[int, int] = {}
                    for p, o in seen:
                        last[p] = max(last.get(p, -1), o)
                    try:
                        c.commit(offsets=[TopicPartition(TOPIC, p, o + 1)
                                          for p, o in sorted(last.items())], asynchronous=False)
                    except Exception as e:  # noqa: BLE001 — a rebalance: redelivered later
                        self.errors.append(e)
        finally:
            c.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def produce(bs: str, partitions: range, per_partition: int, tag: str) -> set[tuple[int, int]]:
    """Writes per_partition records to each partition; returns their (partition, offset)."""
    out: set[tuple[int, int]] = set()
    p = Producer({"bootstrap.servers": bs, "acks": "all", "logger": LOG})

    def delivered(err, msg):
        assert err is None, err
        out.add((msg.partition(), msg.offset()))
    for part in partitions:
        for i in range(per_partition):
            p.produce(TOPIC, key=f"{tag}-{i}".encode(), value=b"v", partition=part,
                      on_delivery=delivered)
    assert p.flush(30) == 0
    return out


def coordinator(tc: ThreadedCluster):
    async def find():
        for b in tc.cluster.brokers.values():
            if not b.running:
                continue
            shard, code = b.groups.shard_for(GROUP)
            if code == 0 and GROUP in shard.consumer_groups:
                return b.node_id, shard.consumer_groups[GROUP].metadata_hash
        return None, None
    return tc.call(find)


def describe(tc: ThreadedCluster):
    """(error, state, group epoch, assignment epoch, {member id: assigned partitions}) by
    ConsumerGroupDescribe v1 to the coordinator."""
    node, _ = coordinator(tc)
    if node is None:
        return None

    async def call():
        b = tc.cluster.brokers[node]
        conn = await KafkaClientConnection.connect(b.host, b.port, client_id="kip848-test")
        try:
            r = await conn.request(ConsumerGroupDescribeRequest(
                group_ids=[GROUP], include_authorized_operations=False), 1)
        finally:
            conn.close()
        [g] = r.groups
        return (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch,
                {m.member_id: sorted(p for tp in m.assignment.topic_partitions
                                     for p in tp.partitions) for m in g.members})
    return tc.call(call)


def wait_until(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = pred()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


def stable_with(tc, members: list[Member], partitions: int):
    """The group Stable, every partition assigned once, and each consumer using its share."""
    def ok():
        d = describe(tc)
        if d is None or d[0] != 0 or d[1] != "Stable" or len(d[4]) != len(members):
            return None
        assigned = sorted(p for ps in d[4].values() for p in ps)
        if assigned != list(range(partitions)):
            return None
        held = []
        for m in members:
            with m.lock:
                held += m.assignment
        return d if sorted(held) == list(range(partitions)) else None
    return wait_until(ok, 60, f"a Stable group over {partitions} partitions")


def consumed_all(members: list[Member], wanted: set[tuple[int, int]]) -> None:
    def ok():
        got = set()
        for m in members:
            with m.lock:
                got |= m.got
        return wanted <= got
    wait_until(ok, 60, "every produced record consumed")


@pytest.mark.timeout(240)
def test_consumer_protocol_join_consume_commit_and_kip1101_bumps():
    with ThreadedCluster(brokers=3, racks=("r1", "r2", "r3"), group_initial_rebalance_delay_ms=0,
                         group_consumer_heartbeat_interval_ms=300) as tc:
        bs = tc.bootstrap
        tc.create_topic(TOPIC, 6, 3)
        produced = produce(bs, range(6), 10, "a")
        members = [Member(bs, f"m{i}", f"r{i}") for i in (1, 2, 3)]
        try:
            # Join, consume, commit.
            d = stable_with(tc, members, 6)
            assert sorted(len(ps) for ps in d[4].values()) == [2, 2, 2]
            consumed_all(members, produced)
            _, _, epoch0, _, _ = stable_with(tc, members, 6)
            node, hash0 = coordinator(tc)

            async def committed():
                code, topics = tc.cluster.brokers[node].groups.offsets.fetch_offsets(GROUP, None)
                return code, {p: o for t, ps in topics for p, o, *_ in ps if t == TOPIC}
            wait_until(lambda: tc.call(committed) == (0, {p: 10 for p in range(6)}), 30,
                       "offsets 10 committed on every partition")

            # Add partitions: exactly one group epoch bump, new partitions assigned and consumed.
            admin = AdminClient({"bootstrap.servers": bs, "logger": LOG})
            for f in admin.create_partitions([NewPartitions(TOPIC, 9)]).values():
                f.result(30)
            d = stable_with(tc, members, 9)
            time.sleep(SETTLE_S)
            d = stable_with(tc, members, 9)
            assert d[2] == epoch0 + 1, f"expected one bump after CreatePartitions: {d}"
            assert d[3] == d[2]
            _, hash1 = coordinator(tc)
            assert hash1 != hash0
            more = produce(bs, range(9), 5, "b")
            consumed_all(members, produced | more)

            # Leader moves only: no bump, same hash.
            for p in range(9):
                leader = tc.leader_of(TOPIC, p)
                tc.call(tc.cluster.move_leader, TOPIC, p, leader % 3 + 1)
            time.sleep(SETTLE_S)
            d = stable_with(tc, members, 9)
            assert d[2] == epoch0 + 1, f"a leader move bumped the group epoch: {d}"
            assert coordinator(tc)[1] == hash1

            # A broker that does not coordinate the group restarts in another rack: one bump.
            node, _ = coordinator(tc)
            other = next(i for i in (1, 2, 3) if i != node)
            tc.call(tc.cluster.restart_broker, other, rack="r9")
            wait_until(lambda: (describe(tc) or (0, "", 0))[2] == epoch0 + 2, 60,
                       "the rack change's bump")
            stable_with(tc, members, 9)
            time.sleep(SETTLE_S)
            d = stable_with(tc, members, 9)
            assert d[2] == epoch0 + 2, f"expected exactly one bump after the restart: {d}"
            assert coordinator(tc)[1] not in (hash0, hash1)
            last = produce(bs, range(9), 5, "c")
            consumed_all(members, produced | more | last)
        finally:
            for m in members:
                m.stop()
        # Members left with epoch -1: the group is Empty.
        d = wait_until(lambda: (lambda d: d if d and d[1] == "Empty" else None)(describe(tc)),
                       30, "an Empty group after the consumers closed")
        assert d[4] == {}
