"""Spark's Kafka connector options, point by point (docs/spark.md's table): each honoured option
changes what is observed, each refused one errors saying why, an unknown one names the nearest."""
from __future__ import annotations

import asyncio
import time

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchRequest

from minibroker.client import Admin, TopicPartition
from minibroker.client.records import batches_after
from minibroker.spark.option_table import OptionError, check
from minibroker.spark.options import parse
from minibroker.spark.sink import parse_sink

pytestmark = pytest.mark.timeout(600)


def _stored_batches(bootstrap: str, topic: str, partition: int = 0) -> list:
    """(codec, records) of each record batch stored in topic-partition, from a raw Fetch."""
    async def go():
        async with Admin(bootstrap) as a:
            await a.metadata.refresh([topic])
            leader = a.metadata.leader(topic, partition)
            T = FetchRequest.FetchTopic
            req = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=64 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1,
                               forgotten_topics_data=[], rack_id="", topics=[T(
                                   topic=topic, partitions=[T.FetchPartition(
                                       partition=partition, current_leader_epoch=-1,
                                       fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                                       partition_max_bytes=64 << 20)])])
            resp = await a.pool.request(leader, req, lo=4, hi=11)
            data = resp.responses[0].partitions[0].records or b""
            return [(b.compression_type, sum(1 for _ in b)) for b in batches_after(bytes(data), 0)]
    return asyncio.run(go())


def _hw(bootstrap: str, topic: str, partitions: int) -> int:
    async def go():
        async with Admin(bootstrap) as a:
            got = await a.list_offsets({TopicPartition(topic, p): "latest" for p in range(partitions)})
            return sum(o for o, _ in got.values())
    return asyncio.run(go())


def _df(spark, n: int, topic_col: str | None = None):
    cols = ["CAST(concat('k', CAST(id % 7 AS STRING)) AS BINARY) AS key",
            "CAST(id AS STRING) AS value"]
    if topic_col:
        cols.append(f"'{topic_col}' AS topic")
    return spark.range(n, numPartitions=1).selectExpr(*cols)


def _write(df, bootstrap: str, mode: str | None = "append", **opts):
    w = df.write.format("minibroker").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        w = w.option(k.replace("_", "."), v)
    if mode:
        w = w.mode(mode)
    w.save()


# ---------------------------------------------------------------------------- unknown / refused
@pytest.mark.parametrize("name,kind,expect", [
    ("subscibe", "source", "did you mean 'subscribe'"),
    ("startingOfsets", "source", "did you mean 'startingOffsets'"),
    ("kafka.ack", "sink", "did you mean 'kafka.acks'"),
    ("kafka.compresion.type", "sink", "did you mean 'kafka.compression.type'"),
    ("bogusOption", "sink", "unknown option 'bogusOption'"),
    ("kafka.group.id", "source", "without a consumer group"),
    ("kafka.key.deserializer", "source", "ByteArrayDeserializer"),
    ("kafka.value.serializer", "sink", "ByteArraySerializer"),
    ("kafka.linger.ms", "sink", "nothing to linger for"),
    ("kafka.enable.auto.commit", "source", "checkpoint"),
    ("kafkaConsumer.pollTimeoutMs", "source", "no poll loop"),
    ("kafka.ssl.keystore.location", "sink", "PEM"),
    ("maxOffsetsPerTrigger", "sink", "applies to the source"),
    ("kafka.acks", "source", "applies to the sink"),
])
def test_unknown_and_refused_options_are_errors(name, kind, expect):
    with pytest.raises(OptionError, match=expect):
        check({name: "1"}, kind)


def test_values_are_checked():
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}
    for acks, want in (("all", -1), ("-1", -1), ("1", 1), ("0", 0)):
        assert parse_sink({**base, "kafka.acks": acks}).acks == want
    for bad in ("bogus", "2", ""):
        with pytest.raises(OptionError, match="kafka.acks must be all, -1, 1 or 0"):
            parse_sink({**base, "kafka.acks": bad})
    with pytest.raises(OptionError, match="kafka.batch.size must be an integer"):
        parse_sink({**base, "kafka.batch.size": "big"})
    with pytest.raises(OptionError, match="kafka.sasl.mechanism=GSSAPI is not supported"):
        parse_sink({**base, "kafka.security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(OptionError, match="needs a user"):
        parse_sink({**base, "kafka.security.protocol": "SASL_PLAINTEXT",
                    "kafka.sasl.mechanism": "SCRAM-SHA-256"})
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'
    sec = parse_sink({**base, "kafka.security.protocol": "SASL_PLAINTEXT",
                      "kafka.sasl.mechanism": "SCRAM-SHA-256",
                      "kafka.sasl.jaas.config": jaas}).client.client_security()
    assert (sec.mechanism, sec.username, sec.password, sec.tls) == ("SCRAM-SHA-256", "a", "b", False)
    with pytest.raises(OptionError, match="PEM"):
        parse_sink({**base, "kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "JKS"})
    with pytest.raises(OptionError, match="security.protocol=SSL"):
        parse_sink({**base, "kafka.ssl.ca.location": "/x.pem"})      # ssl.* with PLAINTEXT
    with pytest.raises(OptionError, match="cannot load"):
        parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
               "kafka.security.protocol": "SSL", "kafka.ssl.ca.location": "/nonexistent.pem"},
              streaming=False)
    with pytest.raises(OptionError, match="exactlyOnce=true .* kafka.acks=all"):
        parse_sink({**base, "kafka.acks": "1", "exactlyOnce": "true"})
    src = parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                 "kafka.request.timeout.ms": "1234", "kafka.client.id": "me",
                 "kafka.fetch.max.bytes": "1000"}, streaming=False)
    assert (src.client.request_timeout_ms, src.client.client_id, src.fetch_max_bytes) == \
        (1234, "me", 1000)


# ---------------------------------------------------------------------------- through Spark
def test_unknown_option_fails_the_spark_job(spark, kafka):
    kafka.call(kafka.cluster.create_topic, "opt-unknown", 1, 1)
    with pytest.raises(Exception, match="did you mean 'kafka.acks'"):
        _write(_df(spark, 10), kafka.bootstrap, topic="opt-unknown", kafka_ack="all")
    with pytest.raises(Exception, match="did you mean 'subscribe'"):
        spark.read.format("minibroker").option("kafka.bootstrap.servers", kafka.bootstrap) \
            .option("subscribe", "opt-unknown").option("subscrib", "x").load().collect()


def test_acks_0_gets_no_acks(spark, kafka):
    """Produce requests held at the broker: acks=0 returns with nothing appended yet (no answer
    was awaited), the records land once released; acks=all waits for them."""
    kafka.call(kafka.cluster.create_topic, "opt-acks0", 1, 1)
    kafka.hold(ApiKey.Produce)
    try:
        _write(_df(spark, 500), kafka.bootstrap, topic="opt-acks0", kafka_acks="0")
        assert _hw(kafka.bootstrap, "opt-acks0", 1) == 0
    finally:
        kafka.release(ApiKey.Produce)
        kafka.clear_faults()
    deadline = time.monotonic() + 30
    while _hw(kafka.bootstrap, "opt-acks0", 1) < 500 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _hw(kafka.bootstrap, "opt-acks0", 1) == 500


def test_compression_and_batch_size_are_visible_in_the_stored_batches(spark, kafka):
    for codec, want in (("zstd", 4), ("lz4", 3), ("gzip", 1), ("none", 0)):
        topic = f"opt-codec-{codec}"
        kafka.call(kafka.cluster.create_topic, topic, 1, 1)
        _write(_df(spark, 2000), kafka.bootstrap, topic=topic, kafka_compression_type=codec,
               kafka_batch_size="16384")
        stored = _stored_batches(kafka.bootstrap, topic)
        assert sum(n for _, n in stored) == 2000
        assert {c for c, _ in stored} == {want}, (codec, stored[:3])
    kafka.call(kafka.cluster.create_topic, "opt-big-batches", 1, 1)
    _write(_df(spark, 2000), kafka.bootstrap, topic="opt-big-batches",
           kafka_batch_size="1048576")
    small, big = _stored_batches(kafka.bootstrap, "opt-codec-none"), \
        _stored_batches(kafka.bootstrap, "opt-big-batches")
    assert len(small) > len(big) >= 1, (len(small), len(big))


def test_ssl_against_a_plaintext_port_is_refused(spark, kafka):
    kafka.call(kafka.cluster.create_topic, "opt-ssl", 1, 1)
    with pytest.raises(Exception, match="security.protocol=SSL"):
        _write(_df(spark, 10), kafka.bootstrap, topic="opt-ssl", kafka_security_protocol="SSL")
    with pytest.raises(Exception, match="SSL|ssl"):
        spark.read.format("minibroker").option("kafka.bootstrap.servers", kafka.bootstrap) \
            .option("subscribe", "opt-ssl").option("kafka.security.protocol", "SSL") \
            .option("kafka.request.timeout.ms", "5000").load().collect()
    assert _hw(kafka.bootstrap, "opt-ssl", 1) == 0


def test_topic_option_wins_over_the_column_and_save_modes(spark, kafka):
    for t in ("opt-col", "opt-opt"):
        kafka.call(kafka.cluster.create_topic, t, 1, 1)
    _write(_df(spark, 50, topic_col="opt-col"), kafka.bootstrap, topic="opt-opt")
    assert (_hw(kafka.bootstrap, "opt-col", 1), _hw(kafka.bootstrap, "opt-opt", 1)) == (0, 50)
    _write(_df(spark, 50, topic_col="opt-col"), kafka.bootstrap, mode=None)   # no mode: appends
    assert _hw(kafka.bootstrap, "opt-col", 1) == 50
    with pytest.raises(Exception, match="Overwrite is not allowed"):
        _write(_df(spark, 5), kafka.bootstrap, mode="overwrite", topic="opt-opt")
    assert _hw(kafka.bootstrap, "opt-opt", 1) == 50
