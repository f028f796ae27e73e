"""The connector against another Kafka implementation: librdkafka's mock cluster.

A confluent-kafka client created with `test.mock.num.brokers` starts a mock cluster in its own
process (brokers on 127.0.0.1, ports chosen by librdkafka) that other clients can use while that
client object lives. Its ApiVersions speaks only v0-2 and answers our v3 request with
UNSUPPORTED_VERSION in a shape no version decodes (KIP-511's fallback must cope), it has no
CreateTopics: topics come from auto-creation (4 partitions) on a Metadata request.
"""
from __future__ import annotations

import asyncio
import time

import pytest

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def mock_cluster():
    import confluent_kafka
    holder = confluent_kafka.Producer({"test.mock.num.brokers": 3, "log_level": 3})
    brokers = holder.list_topics(timeout=10).brokers
    yield ",".join(f"{b.host}:{b.port}" for _, b in sorted(brokers.items()))
    holder.flush(5)
    del holder


def test_reference_client_falls_back_to_api_versions_v0_of_the_mock(mock_cluster):
    from minibroker.client import Producer

    async def go():
        async with Producer(mock_cluster, acks="all") as p:
            mds = await asyncio.gather(*[p.send("mock-client", b"v%d" % i, key=b"k%d" % i)
                                         for i in range(40)])
            conn = next(c for c in p.pool._conns.values())
            return mds, dict(conn.api_versions)
    mds, ranges = asyncio.run(go())
    assert len({(m.partition, m.offset) for m in mds}) == 40
    assert ranges[18][1] == 2           # the mock's ApiVersions range, learnt through the fallback


def _read_back(bootstrap: str, topic: str, want: int) -> list:
    import confluent_kafka
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                                  "auto.offset.reset": "earliest", "log_level": 3})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < want and time.monotonic() < deadline:
            out += [m for m in c.consume(1000, 1.0) if m.error() is None]
    finally:
        c.close()
    return out


def test_spark_writes_and_reads_the_mock_cluster(spark, mock_cluster):
    n = 5000
    df = spark.range(n, numPartitions=2).selectExpr(
        "CAST(concat('k', CAST(id % 97 AS STRING)) AS BINARY) AS key", "CAST(id AS STRING) AS value")
    (df.write.format("minibroker").option("kafka.bootstrap.servers", mock_cluster)
     .option("topic", "mock-spark").mode("append").save())
    got = _read_back(mock_cluster, "mock-spark", n)
    assert sorted(int(m.value()) for m in got) == list(range(n))
    assert {m.partition() for m in got} == {0, 1, 2, 3}      # auto-created with 4 partitions

    rows = (spark.read.format("minibroker").option("kafka.bootstrap.servers", mock_cluster)
            .option("subscribe", "mock-spark").load().select("key", "value", "partition", "offset")
            .collect())
    assert len(rows) == n
    assert sorted(int(bytes(r.value)) for r in rows) == list(range(n))
    where = {int(m.value()): (m.partition(), m.offset()) for m in got}
    assert all(where[int(bytes(r.value))] == (r.partition, r.offset) for r in rows)
