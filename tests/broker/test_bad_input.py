"""Bad input on one connection: that connection gets an error or is closed (with a log line), and
nothing else notices — a connection opened before it still gets valid answers, and the partition's
log and replication state are unchanged.

Raw asyncio streams against a real in-process cluster over loopback sockets, on virtual time.
"""
from __future__ import annotations

import asyncio
import struct

import pytest
from kafka.errors import CorruptRecordError, InvalidRecordError, UnsupportedVersionError
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from cluster_helpers import batch, connect, log_bytes, produce_request, produce_response, wire
from minibroker.broker.dispatch import supported_versions
from minibroker.cluster import Cluster
from minibroker.log.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER, HEADER_SIZE, crc32c
from minibroker.log.config import LogConfig
from minibroker.log.partition_log import PartitionLog
from minibroker.network.client import KafkaClientConnection, decode_response, encode_request

MAX_REQUEST = 8192          # socket.request.max.bytes of these clusters
TOPIC = "t"


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def header(api_key: int, version: int, corr: int = 7, client_id: bytes = b"bad",
           flexible: bool = False) -> bytes:
    return (struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
            + (b"\x00" if flexible else b""))


def encoded(req, version: int, corr: int = 7) -> bytes:
    """A valid request frame, as bytes."""
    return b"".join(bytes(p) for p in encode_request(req, version, corr, "bad"))


def api_versions_response(error_code: int = 0) -> ApiVersionsResponse:
    V = ApiVersionsResponse.ApiVersion
    return ApiVersionsResponse(error_code=error_code, throttle_time_ms=0, api_keys=[
        V(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in supported_versions()])


def no_features(resp: ApiVersionsResponse) -> ApiVersionsResponse:
    """The answer without its v3+ feature flags, whose epoch follows the metadata log
    (tests/broker/test_api_versions_features.py checks them)."""
    resp.supported_features, resp.finalized_features = [], []
    resp.finalized_features_epoch = -1
    return resp


async def read_frame(reader: asyncio.StreamReader) -> memoryview:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return memoryview(await reader.readexactly(size))


async def assert_closed(reader: asyncio.StreamReader) -> None:
    """The broker closed this connection: EOF, and no response bytes before it."""
    assert await asyncio.wait_for(reader.read(), 10) == b""


class Setup:
    """A 3-broker cluster, topic t (RF 3) holding one acknowledged record, the leader's id, a
    healthy client connection opened before any bad input, and the partition state then."""

    def __init__(self, c: Cluster, leader: int, healthy: KafkaClientConnection, state: dict):
        self.c, self.leader, self.healthy, self.state = c, leader, healthy, state
        self.logs = {b: log_bytes(c, b, TOPIC, 0) for b in c.brokers}

    async def open_raw(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        b = self.c.brokers[self.leader]
        return await asyncio.open_connection(b.host, b.port)

    async def assert_broker_unharmed(self) -> None:
        resp = await self.healthy.request(ApiVersionsRequest(), 3)
        assert no_features(resp) == no_features(wire(api_versions_response(), 3))
        md = await self.healthy.request(MetadataRequest(topics=None), 1)
        assert [(t.error_code, t.name, [(p.error_code, p.leader_id) for p in t.partitions])
                for t in md.topics] == [(0, TOPIC, [(0, self.leader)])]
        assert await self.c.partition_state(TOPIC, 0) == self.state
        assert {b: log_bytes(self.c, b, TOPIC, 0) for b in self.c.brokers} == self.logs
        assert all(b.running for b in self.c.brokers.values())


@pytest.fixture
async def setup():
    async with Cluster(brokers=3, socket_request_max_bytes=MAX_REQUEST) as c:
        await c.create_topic(TOPIC, 1, 3)
        leader = await c.leader_of(TOPIC, 0)
        healthy = await connect(c, leader, "healthy")
        resp = await healthy.request(produce_request(TOPIC, 0, batch([b"v0"], c.clock.now_ms())), 9)
        assert resp == wire(produce_response(TOPIC, 0, base_offset=0, log_start_offset=0), 9)
        for _ in range(1000):          # followers learn the high watermark on their next fetch
            state = await c.partition_state(TOPIC, 0)
            if all(log["high_watermark"] == 1 for log in state["logs"].values()):
                break
            await asyncio.sleep(0.01)
        assert sorted(state["logs"]) == [1, 2, 3]
        yield Setup(c, leader, healthy, state)
        healthy.close()


def closing_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "minibroker.network" and "closing connection" in r.getMessage()
            and "broker stopping" not in r.getMessage()]


# ---------------------------------------------------------------------- connection-closing input
_metadata_v12 = encoded(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
    topic_id=None, name=TOPIC)], allow_auto_topic_creation=False,
    include_topic_authorized_operations=False), 12)
_api_versions_v3 = encoded(ApiVersionsRequest(client_software_name="bad",
                                              client_software_version="1"), 3)

CLOSING_CASES = {
    # frame size over socket.request.max.bytes: refused from the 4 size bytes alone
    "oversized_frame": (struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 64,
                        f"frame of {MAX_REQUEST + 1} bytes exceeds socket.request.max.bytes="
                        f"{MAX_REQUEST}"),
    "negative_frame_size": (struct.pack(">i", -5) + b"\x00" * 16, "invalid frame size -5"),
    # a complete frame whose body stops in the middle of the topics array
    "truncated_body": (frame(_metadata_v12[4:-6]), "cannot decode MetadataRequest v12"),
    "unknown_api_key": (frame(header(9999, 0) + b"\x00" * 8), "unknown api key 9999"),
    "unsupported_version_of_metadata": (frame(header(3, 99) + b"\x00" * 8),
                                        "unsupported version 99 of Metadata"),
    "shorter_than_a_header": (frame(b"\x00\x03\x00"), "shorter than a header"),
    # Metadata v1: a valid header, then a topics array claiming 2^31-1 entries of garbage
    "garbage_after_valid_header": (frame(header(3, 1) + b"\x7f\xff\xff\xff" + b"\xfe" * 40),
                                   "cannot decode MetadataRequest v1"),
    "truncated_client_id": (frame(struct.pack(">hhih", 18, 0, 7, 50) + b"ab"),
                            "truncated client_id"),
}


@pytest.mark.parametrize("case", sorted(CLOSING_CASES))
async def test_bad_frame_closes_only_its_connection(setup, caplog, case):
    data, reason = CLOSING_CASES[case]
    reader, writer = await setup.open_raw()
    writer.write(data)
    await writer.drain()
    await assert_closed(reader)
    writer.close()
    [line] = closing_lines(caplog)
    # the listener names itself: "broker N PLAINTEXT: closing connection from ..."
    assert f"broker {setup.leader} PLAINTEXT: closing connection from" in line
    assert reason in line, line
    await setup.assert_broker_unharmed()


async def test_bad_frame_after_pipelined_good_requests_answers_them_first(setup, caplog):
    """Responses leave in request order; the bad frame closes the connection after them."""
    reader, writer = await setup.open_raw()
    good = encoded(ApiVersionsRequest(), 0, corr=1) + encoded(ApiVersionsRequest(), 0, corr=2)
    writer.write(good + frame(header(9999, 0, corr=3)))
    await writer.drain()
    for corr in (1, 2):
        f = await read_frame(reader)
        assert struct.unpack_from(">i", f)[0] == corr
        assert decode_response(ApiVersionsResponse, f, 0) == wire(api_versions_response(), 0)
    await assert_closed(reader)
    writer.close()
    assert len(closing_lines(caplog)) == 1
    await setup.assert_broker_unharmed()


# ---------------------------------------------------------------------- answered, not closed
async def test_trailing_bytes_after_a_complete_body_are_ignored_like_kafka(setup, caplog):
    """Kafka never checks that a request body was consumed, and librdkafka 2.16's admin client
    relies on it (Metadata v13 with an extra field): the request is answered, nothing closes."""
    reader, writer = await setup.open_raw()
    writer.write(frame(_api_versions_v3[4:] + b"\x00\x01\x02"))
    await writer.drain()
    f = await read_frame(reader)
    assert no_features(decode_response(ApiVersionsResponse, f, 3)) == \
        no_features(wire(api_versions_response(), 3))
    writer.close()
    assert closing_lines(caplog) == []
    await setup.assert_broker_unharmed()


async def test_unsupported_api_versions_version_is_answered_at_v0(setup, caplog):
    """KIP-511: UNSUPPORTED_VERSION (35) in a v0 response with our ranges; the connection stays."""
    reader, writer = await setup.open_raw()
    writer.write(frame(header(18, 99, corr=41, flexible=True) + b"\x04bad\x021\x00"))
    await writer.drain()
    f = await read_frame(reader)
    assert struct.unpack_from(">i", f)[0] == 41
    resp = decode_response(ApiVersionsResponse, f, 0)
    assert resp == wire(api_versions_response(UnsupportedVersionError.errno), 0)
    assert UnsupportedVersionError.errno == 35
    assert (0, 3, 12) in [(v.api_key, v.min_version, v.max_version) for v in resp.api_keys]
    # The client retries at a version we support, on the same connection.
    writer.write(encoded(ApiVersionsRequest(), 3, corr=42))
    await writer.drain()
    f = await read_frame(reader)
    assert struct.unpack_from(">i", f)[0] == 42
    assert no_features(decode_response(ApiVersionsResponse, f, 3)) == \
        no_features(wire(api_versions_response(), 3))
    writer.close()
    assert closing_lines(caplog) == []
    await setup.assert_broker_unharmed()


def _corrupt_message(records: bytes) -> str:
    """What the log says about these records (the message the response carries)."""
    with pytest.raises(CorruptRecordError) as e:
        PartitionLog(TOPIC, 0, LogConfig(), None).append_as_leader(records, 0)
    return str(e.value)


async def test_bad_crc_is_corrupt_message_for_that_partition(setup, caplog):
    good = bytearray(batch([b"x" * 20], setup.c.clock.now_ms()))
    good[-5] ^= 0xFF                        # a record byte: covered by the CRC
    bad = bytes(good)
    conn = await connect(setup.c, setup.leader, "bad")
    for acks in (1, -1):
        resp = await conn.request(produce_request(TOPIC, 0, bad, acks=acks), 9)
        assert resp == wire(produce_response(TOPIC, 0, CorruptRecordError.errno,
                                             error_message=_corrupt_message(bad)), 9)
    # Not a connection error: the same connection keeps working.
    assert no_features(await conn.request(ApiVersionsRequest(), 3)) == \
        no_features(wire(api_versions_response(), 3))
    conn.close()
    assert closing_lines(caplog) == []
    await setup.assert_broker_unharmed()


async def assert_corrupt_message(setup, caplog, records: bytes) -> None:
    """Producing `records` answers CORRUPT_MESSAGE with Kafka's message; the connection stays
    open and the broker unharmed."""
    conn = await connect(setup.c, setup.leader, "bad")
    resp = await conn.request(produce_request(TOPIC, 0, records), 9)
    assert resp == wire(produce_response(TOPIC, 0, CorruptRecordError.errno,
                                         error_message=_corrupt_message(records)), 9)
    conn.close()
    assert closing_lines(caplog) == []
    await setup.assert_broker_unharmed()


async def test_truncated_batch_is_corrupt_message(setup, caplog):
    await assert_corrupt_message(setup, caplog, batch([b"x" * 20], setup.c.clock.now_ms())[:-7])


@pytest.mark.parametrize("records", [b"", None], ids=["empty", "null"])
async def test_empty_records_is_invalid_record(setup, caplog, records):
    """Produce v3+ needs exactly one batch per partition: none is INVALID_RECORD (87)."""
    conn = await connect(setup.c, setup.leader, "bad")
    resp = await conn.request(produce_request(TOPIC, 0, records), 9)
    [t] = resp.responses
    [p] = t.partition_responses
    assert (p.index, p.error_code, p.base_offset, p.log_start_offset) == (
        0, InvalidRecordError.errno, -1, -1)
    assert resp == wire(produce_response(TOPIC, 0, InvalidRecordError.errno,
                                         error_message=p.error_message), 9)
    assert p.error_message
    conn.close()
    assert closing_lines(caplog) == []
    await setup.assert_broker_unharmed()


async def test_batch_with_zero_records_is_corrupt_message(setup, caplog):
    """A batch header with a valid CRC but counting 0 records (lastOffsetDelta -1): rejected as
    CORRUPT_MESSAGE (the offset range of the batch is invalid), nothing is appended."""
    fields = list(HEADER.unpack_from(batch([b"x"], setup.c.clock.now_ms()), 0))
    fields[1] = HEADER_SIZE - 12          # batch length: the header alone
    fields[6] = -1                        # last offset delta
    fields[12] = 0                        # record count
    empty = bytearray(HEADER_SIZE)
    HEADER.pack_into(empty, 0, *fields)
    struct.pack_into(">I", empty, CRC_OFFSET, crc32c(empty[ATTRIBUTES_OFFSET:]))
    await assert_corrupt_message(setup, caplog, bytes(empty))
