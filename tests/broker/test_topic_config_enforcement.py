"""Topic configs that mean something to an in-memory log, enforced on Produce as Kafka's
LogValidator does: keyless records on compacted topics (INVALID_RECORD with KIP-467 record
errors), CreateTime bounds (INVALID_TIMESTAMP), compression.type recompression, max.message.bytes;
then through confluent-kafka, as a client reports them."""
from __future__ import annotations

import pytest
from kafka.errors import InvalidRecordError, InvalidTimestampError, MessageSizeTooLargeError
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection

pytestmark = pytest.mark.timeout(60)
NOW = 1_800_000_000_000


def batch(records, compression=0) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20)
    for ts, key, value in records:
        b.append(timestamp=ts, key=key, value=value)
    b.close()
    return b.buffer()


async def produce(c: Cluster, topic: str, records: bytes, version: int = 9):
    b = c.brokers[await c.leader_of(topic, 0)]
    conn = await KafkaClientConnection.connect(b.host, b.port)
    pd = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
    resp = await conn.request(ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[pd])]), version)
    conn.close()
    return resp.responses[0].partition_responses[0]


def stored(c: Cluster, topic: str) -> list:
    for b in c.brokers.values():
        p = b.replica_manager.partitions.get((topic, 0))
        if p is not None and p.is_leader:
            return [bytes(v) for v in p.log.read(0, 1 << 30).records]
    raise AssertionError("no leader")


async def test_keyless_records_on_a_compacted_topic_are_refused_with_record_errors():
    async with Cluster(brokers=1) as c:
        await c.create_topic("cmp", 1, 1, {"cleanup.policy": "compact,delete"})
        now = c.clock.now_ms()
        r = await produce(c, "cmp", batch([(now, b"k", b"1"), (now, None, b"2"),
                                           (now, b"k", b"3"), (now, None, b"4")]))
        assert r.error_code == InvalidRecordError.errno
        message = "Compacted topic cannot accept message without key in topic partition cmp-0."
        assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [
            (1, message), (3, message)]
        assert "One or more records have been rejected due to 2 record errors" in r.error_message
        r = await produce(c, "cmp", batch([(now, None, b"2")]), version=7)    # before KIP-467
        assert r.error_code == InvalidRecordError.errno
        assert (await produce(c, "cmp", batch([(now, b"k", b"1")]))).error_code == 0
        assert stored(c, "cmp") and len(stored(c, "cmp")) == 1


async def test_create_time_bounds_and_max_message_bytes():
    async with Cluster(brokers=1) as c:
        await c.create_topic("ts", 1, 1, {"message.timestamp.before.max.ms": "60000",
                                          "max.message.bytes": "2000"})
        await c.create_topic("plain", 1, 1)
        now = c.clock.now_ms()
        r = await produce(c, "ts", batch([(now, b"a", b"1"), (now - 120_000, b"b", b"2"),
                                          (now + 7_200_000, b"c", b"3")]))
        assert r.error_code == InvalidTimestampError.errno
        assert [e.batch_index for e in r.record_errors] == [1, 2]
        assert r.record_errors[0].batch_index_error_message == (
            f"Timestamp {now - 120_000} of message with offset 1 is out of range. The timestamp "
            f"should be within [{now - 60_000}, {now + 3_600_000}]")
        assert (await produce(c, "ts", batch([(now - 30_000, b"a", b"1")]))).error_code == 0
        r = await produce(c, "ts", batch([(now, b"a", b"x" * 3000)]))
        assert r.error_code == MessageSizeTooLargeError.errno
        # no bound set: Kafka 4.0's one-hour after.max.ms is not enforced alone (a seeded
        # cluster's clock is not its clients')
        assert (await produce(c, "plain", batch([(now + 3_700_000, b"a", b"1")]))).error_code == 0
        assert (await produce(c, "plain", batch([(now - 10**9, b"a", b"1")]))).error_code == 0


@pytest.mark.parametrize("codec, produced", [("zstd", 0), ("gzip", 3), ("uncompressed", 1),
                                             ("lz4", 4), ("snappy", 1)])
async def test_compression_type_recompresses_into_the_topics_codec(codec, produced):
    ids = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    async with Cluster(brokers=1) as c:
        await c.create_topic("z", 1, 1, {"compression.type": codec})
        now = c.clock.now_ms()
        records = [(now + i, b"k%d" % i, b"value %d " % i * 20) for i in range(50)]
        assert (await produce(c, "z", batch(records, produced))).error_code == 0
        [data] = stored(c, "z")
        assert data[22] & 0x07 == ids[codec]
        got = [(r.timestamp, r.key, r.value) for r in DefaultRecordBatch(data)]
        assert got == records
        assert DefaultRecordBatch(data).validate_crc()


def test_confluent_kafka_reports_keyless_records_on_a_compacted_topic():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from minibroker.testing import ThreadedCluster
    with ThreadedCluster(brokers=1) as c:
        c.create_topic("cmp", 1, 1, {"cleanup.policy": "compact"})
        p = confluent_kafka.Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0})
        errors = []
        p.produce("cmp", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
        assert p.flush(30) == 0         # its own batch: a refused batch fails all its records
        p.produce("cmp", key=b"k", value=b"keyed", on_delivery=lambda err, msg: errors.append(err))
        assert p.flush(30) == 0
        assert [e and e.code() for e in errors] == [confluent_kafka.KafkaError.INVALID_RECORD, None]
