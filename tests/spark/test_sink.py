"""The sink: 100k rows written by Spark (batch) read back exactly by librdkafka (confluent-kafka),
keyed rows in their KIP-253 linear-hashing partition; and a stream copied topic to topic."""
from __future__ import annotations

import time

import pytest

from minibroker.partitioning import partition_for_key
from spark_helpers import produce

pytestmark = pytest.mark.timeout(600)


def _read_all(bootstrap: str, topic: str, want: int, timeout: float = 120.0) -> list:
    import confluent_kafka
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < want and time.monotonic() < deadline:
            for m in c.consume(10000, 1.0):
                if m.error() is None:
                    out.append((m.key(), m.value(), m.partition(), m.headers()))
        for m in c.consume(10000, 2.0):                # nothing beyond what was written
            if m.error() is None:
                out.append((m.key(), m.value(), m.partition(), m.headers()))
    finally:
        c.close()
    return out


def test_sink_writes_100k_rows_librdkafka_reads_back_exactly(spark, kafka):
    kafka.call(kafka.cluster.create_topic, "sink100k", 4, 2)
    n = 100_000
    df = spark.range(n, numPartitions=2).selectExpr(
        "CAST(concat('k', CAST(id % 1000 AS STRING)) AS BINARY) AS key",
        "CAST(id AS STRING) AS value",
        "CASE WHEN id % 1000 = 0 THEN array(named_struct('key', 'h', 'value', CAST('x' AS BINARY))) "
        "ELSE CAST(NULL AS array<struct<key: string, value: binary>>) END AS headers")
    (df.write.format("minibroker").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("topic", "sink100k").mode("append").save())
    got = _read_all(kafka.bootstrap, "sink100k", n)
    assert len(got) == n
    assert sorted(int(v) for _, v, _, _ in got) == list(range(n))
    for k, v, p, h in got:
        assert p == partition_for_key(k, 4, 4)
        assert k == b"k%d" % (int(v) % 1000)
        assert (h == [("h", b"x")]) == (int(v) % 1000 == 0)


def test_stream_copied_topic_to_topic_with_topic_column(spark, kafka, tmp_path):
    kafka.call(kafka.cluster.create_topic, "copy-src", 3, 2)
    kafka.call(kafka.cluster.create_topic, "copy-dst", 2, 2)
    produce(kafka.bootstrap, "copy-src", [(b"k%d" % (i % 11), b"%d" % i, None, None)
                                          for i in range(2000)])
    q = (spark.readStream.format("minibroker").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("subscribe", "copy-src").option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", 800).load()
         .selectExpr("'copy-dst' AS topic", "key", "upper(CAST(value AS STRING)) AS value")
         .writeStream.format("minibroker").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    got = _read_all(kafka.bootstrap, "copy-dst", 2000)
    assert sorted(int(v) for _, v, _, _ in got) == list(range(2000))
    assert all(p == partition_for_key(k, 2, 2) for k, _, p, _ in got)
