"""`serve --kafka-version X.Y`: real clients work against an emulated Kafka release, and see that
release's ApiVersions (minus the gaps schemas/releases and docs/kafka-releases.md list).

Each release is served by its own one-broker process; every client creates (or has created) a
topic, produces idempotently, reads it all back and lists its offsets; kafka-python's own broker
version probe names the release.
"""
from __future__ import annotations

import asyncio
import shlex
import sys
import zlib

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.metadata import ApiVersionsRequest

from conformance import checks
from conformance.conftest import served_cluster
from conformance.drivers import load
from minibroker.broker import releases
from minibroker.broker.dispatch import supported_versions
from minibroker.network.client import KafkaClientConnection

pytestmark = pytest.mark.timeout(180)

VERSIONS = ("2.8", "3.9", "4.1")
CLIENTS = ("confluent", "kafka_python", "aiokafka", "kafkajs")
PARTITIONS = 2
IO_TIMEOUT = 30.0


@pytest.fixture(scope="module", params=VERSIONS)
def served(request):
    cmd = (f"{shlex.quote(sys.executable)} -m minibroker serve --brokers 1 --port 0 "
           f"--kafka-version {request.param} --override group.initial.rebalance.delay.ms=0")
    with served_cluster(cmd, replication=1) as cluster:
        cluster.kafka_version = request.param
        yield cluster


def _api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")

    async def ask():
        conn = await KafkaClientConnection.connect(host, int(port), client_id="conformance")
        try:
            return await conn.request(ApiVersionsRequest(), 3)
        finally:
            conn.close()
    resp = asyncio.run(ask())
    assert resp.error_code == 0
    return {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}


def test_apiversions_is_the_release(served):
    v = served.kafka_version
    want = {k: (lo, hi) for k, lo, hi in supported_versions(False, releases.dispatch_table(v))}
    got = _api_versions(served.bootstrap)
    assert got == want
    kafka = releases.load(v).apis
    gaps = {k for k, *_ in releases.gaps(v)}
    assert {k: r for k, r in got.items() if k not in gaps} == \
        {k: r for k, r in kafka.items() if k not in gaps}
    if v == "2.8":
        assert 68 not in got and got[0][1] == 9 and got[1][1] == 12


def test_kafka_python_probes_the_release(served):
    admin = KafkaAdminClient(bootstrap_servers=served.bootstrap, client_id="conformance-probe")
    try:
        probed = admin._manager.broker_version_data.broker_version
    finally:
        admin.close()
    release = tuple(int(p) for p in served.kafka_version.split("."))
    if served.kafka_version == "4.1":
        # kafka-python dates 4.0 by ListOffsets v10 and 4.1 by Produce v13, neither served here
        # (docs/kafka-releases.md): it takes the broker for the newest release it can prove.
        assert probed[:2] == (3, 9)
    else:
        assert probed[:2] == release


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_consume(served, client):
    d = load(client)
    why = d.available() if hasattr(d, "available") else None
    if why:
        pytest.fail(f"{client}: {why}")
    topic = served.topic_name(f"v{served.kafka_version}-{client}")
    admin = d if d.HAS_ADMIN else load("kafka_python")
    admin.create_topic(served.bootstrap, topic, PARTITIONS, 1, timeout=IO_TIMEOUT)
    records = checks.make_records(60, zlib.crc32(topic.encode()))
    idempotent = getattr(d, "HAS_IDEMPOTENCE", False)
    produced = d.produce(served.bootstrap, topic, records, "none", acks="all",
                         idempotent=idempotent, timeout=60)
    consumed = d.consume_assigned(served.bootstrap, topic, list(range(PARTITIONS)), len(records),
                                  timeout=IO_TIMEOUT)
    checks.check_readback(records, produced, consumed, PARTITIONS)
    assert d.list_offsets(served.bootstrap, topic, timeout=IO_TIMEOUT) == \
        checks.expected_offsets(consumed, PARTITIONS)
