"""Kafka release emulation (ClusterConfig.kafka_version): ApiVersions advertises what the release's
brokers advertised (schemas/releases/, generated from Kafka's message definitions), narrowed to
what minibroker serves, and requests outside it are treated as that release's broker treated them.

The tables are cross-checked against two independent sources: kafka-python's
BROKER_API_VERSIONS (ApiVersions answers recorded from real brokers of each release) and
librdkafka's feature map (schemas/releases/librdkafka-features.json, extracted from
src/rdkafka_feature.c by generate.py: which broker release each feature came with).
"""
from __future__ import annotations

import asyncio
import json
import struct

import pytest
from kafka.errors import UnsupportedVersionError
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse,
                                     FindCoordinatorRequest, MetadataRequest)
from kafka.protocol.producer import InitProducerIdRequest

from cluster_helpers import connect, produce_request
from minibroker.broker import releases
from minibroker.broker.dispatch import HANDLERS, INTER_BROKER_KEYS
from minibroker.cluster import Cluster
from minibroker.config import ClusterConfig, emulated_releases
from minibroker.log.batch import build_batch
from minibroker.network.client import decode_response, encode_request
from minibroker.protocol.messages import ConsumerGroupHeartbeatRequest
from minibroker.protocol.schemas import SCHEMAS_DIR


def table(version: str) -> dict[int, tuple[int, int]]:
    return releases.load(version).apis


# What minibroker does not serve of each release, on a client listener (the doc lists them all):
# message formats v0/v1 (Produce < 3, Fetch < 4, ListOffsets v0, OffsetForLeaderEpoch < 2), ACLs,
# delegation tokens, quotas, SCRAM, log-dir moves, KRaft/ZK inter-broker APIs. A change to the
# served ranges shows here first.
def gap_keys(version: str) -> list[int]:
    return [k for k, *_ in releases.gaps(version)]


@pytest.mark.parametrize("version", ["2.1", "2.8", "3.9"])
def test_tables_match_what_kafka_python_recorded_from_real_brokers(version):
    recorded = BROKER_API_VERSIONS[tuple(int(p) for p in version.split("."))]
    assert table(version) == recorded
    assert "kafka-python" not in releases.load(version).source   # generated from Kafka's tags


def test_every_release_from_2_1_to_4_1_is_emulated():
    assert emulated_releases() == ("2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "3.0",
                                   "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9",
                                   "4.0", "4.1")
    for v in emulated_releases():
        assert table(v) == BROKER_API_VERSIONS[tuple(int(p) for p in v.split("."))], v


def _librdkafka_features() -> list[dict]:
    return json.loads((SCHEMAS_DIR / "releases" / "librdkafka-features.json").read_text())


def _has(apis: dict[int, tuple[int, int]], depends: list[list[int]]) -> bool:
    """librdkafka's rule (rd_kafka_feature_match): every dependency's range overlaps the broker's."""
    return all(k in apis and lo <= apis[k][1] and apis[k][0] <= hi for k, lo, hi in depends)


@pytest.mark.parametrize("version", ["2.1", "2.8", "3.9"])
def test_librdkafka_enables_each_feature_its_source_dates_to_this_release(version):
    """Each feature librdkafka's source dates ("@brief >=X.Y") to this release or earlier is
    enabled by the release's table, as against the real broker; and where minibroker's narrowing
    leaves the feature, the emulated broker enables it too."""
    rel = tuple(int(p) for p in version.split("."))
    served = {k: (lo, hi) for k, lo, hi in _advertised(version)}
    checked = 0
    for f in _librdkafka_features():
        if f["since"] is None or tuple(f["since"]) > rel:
            continue
        assert _has(table(version), f["depends"]), (version, f)
        # SASL (keys 17, 36) is a connection's, served once authentication lands; not here.
        if not {k for k, _, _ in f["depends"]} & {17, 36}:
            assert _has(served, f["depends"]), (version, f)
        checked += 1
    assert checked >= 10


def _advertised(version: str) -> list[tuple[int, int, int]]:
    from minibroker.broker.dispatch import supported_versions
    return supported_versions(False, releases.dispatch_table(version))


@pytest.mark.parametrize("version", emulated_releases())
def test_advertised_is_the_release_table_minus_the_listed_gaps(version):
    adv = {k: (lo, hi) for k, lo, hi in _advertised(version)}
    rel = table(version)
    assert set(adv) <= set(rel)                      # nothing the release did not advertise
    for key, name, rng, ours in releases.gaps(version):
        assert rel[key] == rng and adv.get(key) == ours
    for key in sorted(set(rel) - set(gap_keys(version))):
        assert adv[key] == rel[key], (version, key)
    assert not [k for k in adv if k >= releases.PRIVATE_KEYS_FROM]


def test_release_boundaries_a_client_can_see():
    adv = {v: {k: (lo, hi) for k, lo, hi in _advertised(v)} for v in ("2.8", "3.9", "4.0", "4.1")}
    assert 68 not in adv["2.8"] and adv["2.8"][0] == (3, 9) and adv["2.8"][1] == (4, 12)
    assert adv["3.9"][68] == (0, 0)          # advertised by 3.9, answered UNSUPPORTED_VERSION
    assert adv["4.0"][68] == (0, 1) and adv["4.1"][68] == (0, 1)    # KIP-848 GA
    assert adv["3.9"][11][0] == 0 and adv["4.0"][11][0] == 2         # KIP-896 in 4.0
    assert adv["3.9"][1][0] == 4 and adv["4.0"][1][0] == 4
    assert 4 not in adv["3.9"] and 4 not in adv["4.0"]              # never on client listeners


def test_unknown_release_is_refused_in_kafkas_words():
    with pytest.raises(ValueError, match="Invalid value 2.0 for kafka version"):
        ClusterConfig(kafka_version="2.0")


def _frame(req, version: int, corr: int = 7) -> bytes:
    return b"".join(bytes(p) for p in encode_request(req, version, corr, "raw"))


async def _read(reader: asyncio.StreamReader) -> memoryview:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return memoryview(await reader.readexactly(size))


@pytest.mark.parametrize("version", ["2.8", "3.9", "4.1"])
async def test_apiversions_on_the_wire_and_out_of_range_requests(version):
    c = await Cluster(brokers=1, kafka_version=version).start()
    try:
        conn = await connect(c, 1)
        resp = await conn.request(ApiVersionsRequest(client_software_name="t",
                                                     client_software_version="1"), 3)
        assert resp.error_code == 0
        got = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        assert got == {k: (lo, hi) for k, lo, hi in _advertised(version)}
        conn.close()
        b = c.brokers[1]
        # ApiVersions above the release's: answered at v0 with UNSUPPORTED_VERSION (KIP-511).
        reader, writer = await asyncio.open_connection(b.host, b.port)
        av_max = got[18][1]
        writer.write(_frame(ApiVersionsRequest(), av_max + 1 if av_max < 4 else 4, corr=9))
        if av_max < 4:
            v0 = decode_response(ApiVersionsResponse, await _read(reader), 0)
            assert v0.error_code == UnsupportedVersionError.errno
            assert {a.api_key: (a.min_version, a.max_version) for a in v0.api_keys} == got
        writer.close()
        # Metadata above the release's: the connection closes, as Kafka's SocketServer does.
        md_max = got[3][1]
        if md_max < MetadataRequest.max_version:
            reader, writer = await asyncio.open_connection(b.host, b.port)
            writer.write(_frame(MetadataRequest(topics=[]), md_max + 1))
            assert await asyncio.wait_for(reader.read(), 10) == b""
            writer.close()
    finally:
        await c.stop()


async def test_a_key_the_release_did_not_have_closes_the_connection():
    c = await Cluster(brokers=1, kafka_version="2.8").start()
    try:
        b = c.brokers[1]
        reader, writer = await asyncio.open_connection(b.host, b.port)
        # DescribeTopicPartitions (75) came with 3.8.
        writer.write(struct.pack(">i", 12) + struct.pack(">hhih", 75, 0, 1, 0) + b"\x00\x00")
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        await c.stop()


@pytest.mark.parametrize("version, code", [("3.9", UnsupportedVersionError.errno), ("4.0", 0)])
async def test_kip848_groups_only_from_4_0(version, code):
    c = await Cluster(brokers=1, kafka_version=version).start()
    try:
        conn = await connect(c, 1)
        hb = ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000, subscribed_topic_names=["t"], server_assignor=None,
            topic_partitions=[])
        resp = await conn.request(hb, 0)
        # 4.0: the group coordinator answers (14-16 while __consumer_offsets is being created).
        assert resp.error_code in ((code,) if code else (0, 14, 15, 16))
        conn.close()
    finally:
        await c.stop()


def test_handlers_table_is_untouched_by_emulation():
    before = {k: h.versions for k, h in HANDLERS.items()}
    releases.dispatch_table("2.1")
    assert {k: h.versions for k, h in HANDLERS.items()} == before
    assert all(k in INTER_BROKER_KEYS or k >= 1000 or h.advertised for k, h in HANDLERS.items())


def test_the_gaps_page_is_up_to_date():
    assert releases.DOC.read_text() == releases.markdown(), \
        "run: python -m minibroker.broker.releases --write"


@pytest.mark.parametrize("version, appended", [("3.5", True), ("3.6", False)])
async def test_transaction_verification_from_3_6(version, appended):
    """KIP-890 part 1: from 3.6 a transactional batch for a partition not in the transaction is
    refused; before, Kafka appended it (the hanging transaction KIP-890 was written for)."""
    c = await Cluster(brokers=1, kafka_version=version, transaction_state_log_replication_factor=1,
                      transaction_state_log_min_isr=1).start()
    try:
        await c.create_topic("t", 1, 1)
        conn = await connect(c, 1)
        for _ in range(100):
            r = await conn.request(FindCoordinatorRequest(key="tx", key_type=1), 2)
            if r.error_code == 0:
                r = await conn.request(InitProducerIdRequest(transactional_id="tx",
                                                             transaction_timeout_ms=60000), 0)
                if r.error_code == 0:
                    break
            await asyncio.sleep(0.1)
        assert r.error_code == 0
        records = bytes(build_batch([(None, b"v", [])], producer_id=r.producer_id,
                                    producer_epoch=r.producer_epoch, base_sequence=0,
                                    transactional=True))
        req = produce_request("t", 0, records)
        req.transactional_id = "tx"
        resp = await conn.request(req, 9)
        code = resp.responses[0].partition_responses[0].error_code
        assert (code == 0) == appended, code
        conn.close()
    finally:
        await c.stop()
