"""The minibroker source in batch and streaming, on a 3-partition topic of a 3-broker cluster.

Exact counts, no loss and no duplicates (distinct (partition, offset) and values), Spark's option
semantics (startingOffsets / endingOffsets JSON, startingOffsetsByTimestamp, maxOffsetsPerTrigger,
availableNow, failOnDataLoss, includeHeaders), and a streaming query stopped and restarted from its
checkpoint re-reading nothing.
"""
from __future__ import annotations

import json

import pytest

from minibroker.client import TopicPartition
from spark_helpers import admin_call, produce

pytestmark = pytest.mark.timeout(600)

TS0 = 1_700_000_000_000


def _reader(spark, kafka, topic, **opts):
    r = spark.read.format("minibroker").option("kafka.bootstrap.servers", kafka.bootstrap) \
        .option("subscribe", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


@pytest.fixture(scope="module")
def topic3(kafka):
    """'src3': 3 partitions, 3000 keyed records with headers and timestamps TS0 + i."""
    kafka.call(kafka.cluster.create_topic, "src3", 3, 2)
    recs = [(b"k%03d" % (i % 50), b"v%05d" % i, [("i", b"%d" % i)], TS0 + i) for i in range(3000)]
    mds = produce(kafka.bootstrap, "src3", recs)
    return {b"v%05d" % i: md for i, md in enumerate(mds)}


def test_batch_read_every_record_once_with_headers_and_split_ranges(spark, kafka, topic3):
    df = _reader(spark, kafka, "src3", includeHeaders="true", maxRecordsPerPartition=400)
    assert df.rdd.getNumPartitions() >= 9              # 3 partitions of ~1000, cut in <= 400
    rows = df.select("key", "value", "partition", "offset", "timestamp", "timestampType",
                     "headers", "leaderEpoch", "topic").collect()
    assert len(rows) == 3000
    assert len({(r.partition, r.offset) for r in rows}) == 3000
    assert {bytes(r.value) for r in rows} == set(topic3)
    for r in rows[:200]:
        md = topic3[bytes(r.value)]
        i = int(bytes(r.value)[1:])
        assert (r.partition, r.offset) == (md.partition, md.offset)
        assert bytes(r.key) == b"k%03d" % (i % 50) and r.topic == "src3"
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("i", b"%d" % i)]
        assert int(r.timestamp.timestamp() * 1000) == TS0 + i and r.timestampType == 0
        assert r.leaderEpoch >= 0
    counts = {p: 0 for p in range(3)}
    for r in rows:
        counts[r.partition] += 1
    assert all(c > 0 for c in counts.values())


def test_starting_and_ending_offsets_json_and_timestamps(spark, kafka, topic3):
    ends = admin_call(kafka.bootstrap, lambda a: a.list_offsets(
        {TopicPartition("src3", p): "latest" for p in range(3)}))
    hw = {p: ends[TopicPartition("src3", p)][0] for p in range(3)}
    start = {"src3": {"0": 10, "1": -2, "2": hw[2] - 5}}
    end = {"src3": {"0": 20, "1": -1, "2": -1}}
    df = _reader(spark, kafka, "src3", startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = sorted([(0, o) for o in range(10, 20)] + [(1, o) for o in range(hw[1])]
                  + [(2, o) for o in range(hw[2] - 5, hw[2])])
    assert got == want
    # Timestamps: record i has timestamp TS0 + i; from TS0 + 2500 on each partition.
    by_ts = {"src3": {str(p): TS0 + 2500 for p in range(3)}}
    df = _reader(spark, kafka, "src3", startingOffsetsByTimestamp=json.dumps(by_ts))
    values = sorted(int(bytes(r.value)[1:]) for r in df.select("value").collect())
    assert values == list(range(2500, 3000))
    df = _reader(spark, kafka, "src3", startingTimestamp=str(TS0 + 2990))
    assert df.count() == 10
    with pytest.raises(Exception, match="no record at or after timestamp"):
        _reader(spark, kafka, "src3", startingTimestamp=str(TS0 + 10**9)).count()
    assert _reader(spark, kafka, "src3", startingTimestamp=str(TS0 + 10**9),
                   startingOffsetsByTimestampStrategy="latest").count() == 0


def test_fail_on_data_loss(spark, kafka):
    kafka.call(kafka.cluster.create_topic, "lossy", 1, 1)
    produce(kafka.bootstrap, "lossy", [(None, b"%d" % i, None, None) for i in range(100)])
    admin_call(kafka.bootstrap, lambda a: a.delete_records({TopicPartition("lossy", 0): 40}))
    spec = json.dumps({"lossy": {"0": 0}})
    with pytest.raises(Exception, match="deleted before they were read"):
        _reader(spark, kafka, "lossy", startingOffsets=spec).count()
    df = _reader(spark, kafka, "lossy", startingOffsets=spec, failOnDataLoss="false")
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(40, 100))


def test_stream_max_offsets_per_trigger_stopped_and_restarted_from_checkpoint(spark, kafka, tmp_path):
    kafka.call(kafka.cluster.create_topic, "stream3", 3, 2)
    produce(kafka.bootstrap, "stream3", [(b"k%d" % (i % 7), b"%05d" % i, None, None)
                                         for i in range(1500)])
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def run_once():
        q = (spark.readStream.format("minibroker").option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("subscribe", "stream3").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", 400).load()
             .selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination(300)
        assert q.exception() is None, q.exception()
        return [p["numInputRows"] for p in q.recentProgress]

    sizes = run_once()
    assert sum(sizes) == 1500 and max(sizes) <= 400 and len([s for s in sizes if s]) >= 4, sizes
    produce(kafka.bootstrap, "stream3", [(b"k%d" % (i % 7), b"%05d" % i, None, None)
                                         for i in range(1500, 2300)])
    sizes = run_once()                         # restarted from the checkpoint: only the new 800
    assert sum(sizes) == 800 and max(sizes) <= 400, sizes
    rows = spark.read.parquet(out).collect()
    assert len(rows) == 2300
    assert sorted(int(r.v) for r in rows) == list(range(2300))
    assert len({(r.partition, r.offset) for r in rows}) == 2300
    offsets = json.loads(open(sorted((tmp_path / "ckpt" / "offsets").glob("[0-9]*"),
                                     key=lambda p: int(p.name))[-1]).read().splitlines()[-1])
    assert sum(offsets["stream3"].values()) == 2300        # Kafka-style JSON offsets
