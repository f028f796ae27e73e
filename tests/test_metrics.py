"""`serve --metrics-port`: scraped before and after a produce/consume run with kafka-python, the
counters move by exactly what the client sent and read."""
from __future__ import annotations

import time
import urllib.request

import pytest

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder
# The test extra installs prometheus_client: missing, this module fails rather than skips.
from prometheus_client.parser import text_string_to_metric_families

from serve_helpers import cli, serve

pytestmark = pytest.mark.timeout(180)
N = 20
VALUE = b"v" * 100


@pytest.fixture
def served():
    with serve("--metrics-port", "0", "--override", "group.initial.rebalance.delay.ms=0") as (
            bootstrap, p):
        metrics = p.stdout.readline()
        assert metrics.startswith("METRICS http://"), metrics
        yield bootstrap, metrics.split()[1]


def scrape(url: str) -> dict[tuple, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(m: dict, name: str, **labels) -> float:
    """Sum over every series of `name` whose labels include `labels` (e.g. over brokers)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in m.items() if n == name and want <= set(ls))


def per_broker(m: dict, name: str) -> dict[str, float]:
    return {dict(ls)["broker"]: v for (n, ls), v in m.items() if n == name}


def batch_size(value: bytes) -> int:
    """What kafka-python puts on the wire for a one-record batch (its own encoder)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return len(b.build())


@pytest.mark.real_time
def test_metrics_move_by_what_the_client_sent_and_read(served):
    bootstrap, url = served
    r = cli(bootstrap, "topics", "--create", "--topic", "m", "--partitions", "1",
            "--replication-factor", "3")
    assert r.returncode == 0, r.stderr
    before = scrape(url)
    assert total(before, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert total(before, "kafka_server_replicamanager_leadercount") == 1
    assert total(before, "kafka_server_replicamanager_partitioncount") == 3

    # One batch per request: the next send waits for the previous one's answer.
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    for _ in range(N):
        producer.send("m", VALUE, partition=0).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition("m", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got, deadline = 0, time.monotonic() + 30
    while got < N and time.monotonic() < deadline:
        got += sum(len(rs) for rs in consumer.poll(500).values())
    consumer.close()
    assert got == N

    def delta(name, **labels):
        return total(after, name, **labels) - total(before, name, **labels)

    size = batch_size(VALUE)
    deadline = time.monotonic() + 30
    while True:         # until both followers fetched everything (acks=all: they have it)
        after = scrape(url)
        if delta("kafka_server_brokertopicmetrics_replicationbytesin_total") >= 2 * N * size \
                or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic="m") == N
    assert delta("kafka_server_brokertopicmetrics_bytesin_total", topic="m") == N * size
    assert delta("kafka_server_brokertopicmetrics_bytesout_total", topic="m") == N * size
    assert delta("kafka_server_brokertopicmetrics_replicationbytesin_total") == 2 * N * size
    assert delta("kafka_server_brokertopicmetrics_replicationbytesout_total") == 2 * N * size
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce") == N
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Produce") == N
    assert delta("kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
    assert delta("kafka_network_requestmetrics_requests_total", request="Fetch") >= 1
    # The leader alone counts bytes in; the followers alone count replication bytes in.
    leader = [b for b, v in per_broker(after, "kafka_server_replicamanager_leadercount").items()
              if v == 1]
    assert len(leader) == 1
    ins = per_broker(after, "kafka_server_brokertopicmetrics_bytesin_total")
    assert ins[leader[0]] == N * size and sum(ins.values()) == N * size
    assert total(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0

    # A group's committed offset and lag, as reported by its coordinator.
    group = KafkaConsumer(bootstrap_servers=bootstrap, group_id="lagging",
                          enable_auto_commit=False)
    group.assign([tp])
    from kafka.structs import OffsetAndMetadata
    group.commit({tp: OffsetAndMetadata(5, "", -1)})
    group.close()
    m = scrape(url)
    labels = dict(consumergroup="lagging", topic="m", partition="0")
    assert total(m, "kafka_consumergroup_current_offset", **labels) == 5
    assert total(m, "kafka_consumergroup_lag", **labels) == N - 5
    assert total(m, "kafka_server_group_coordinator_metrics_group_count",
                 protocol="classic") == 1


@pytest.mark.cluster(brokers=3, replica_lag_time_max_ms=2000)
async def test_isr_shrink_and_expand_move_the_gauges_and_counters(cluster):
    """A follower that stops fetching is dropped from the ISR by its leader (one shrink, one
    under-replicated partition); fetching again, it is taken back (one expand)."""
    import asyncio

    import kafka.errors as Errors

    from minibroker.metrics import MetricsServer
    metrics = MetricsServer(cluster)

    def now() -> dict:
        return {(n, ls): v for (n, ls), v in _parse(metrics.text().decode()).items()}

    await cluster.create_topic("isr", partitions=1, replication_factor=3)
    leader = await cluster.leader_of("isr", 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    before = now()
    # The leader answers the follower's fetches with an error while `blocked` (a fault control).
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.consumer import FetchResponse
    blocked = [True]

    def refuse(req, ctx):
        if blocked[0] and ctx.node_id == leader and req.replica_id == follower:
            return FetchResponse(throttle_time_ms=0, error_code=Errors.UnknownError.errno,
                                 session_id=0, responses=[])
        return None
    cluster.faults.control(ApiKey.Fetch, refuse)

    async def until(pred, what: str) -> dict:
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            m = now()
            if pred(m):
                return m
            await asyncio.sleep(0.1)
        raise AssertionError(what)

    def count(m, name, broker=None):
        return total(m, name, **({} if broker is None else {"broker": str(broker)})) - \
            total(before, name, **({} if broker is None else {"broker": str(broker)}))

    under = "kafka_server_replicamanager_underreplicatedpartitions"
    m = await until(lambda m: total(m, under, broker=str(leader)) == 1,
                    "never under-replicated")
    assert count(m, "kafka_server_replicamanager_isrshrinks_total", leader) == 1
    assert count(m, "kafka_server_replicamanager_isrshrinks_total") == 1
    blocked[0] = False                                          # fetching again
    m = await until(lambda m: total(m, under) == 0, "still under-replicated")
    assert count(m, "kafka_server_replicamanager_isrexpands_total", leader) == 1
    assert count(m, "kafka_server_replicamanager_isrexpands_total") == 1
    assert count(m, "kafka_server_replicamanager_isrshrinks_total") == 1


def _parse(text: str) -> dict[tuple, float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out
