"""ApiVersions v3+ feature flags (KIP-584): Kafka 4.0's metadata.version range and minibroker's
finalized levels, the epoch following the metadata log, none for an emulated pre-4.0 release."""
from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from cluster_helpers import request_once, wait_until
from minibroker.cluster import Cluster

pytestmark = pytest.mark.timeout(60)
REQ = ApiVersionsRequest(client_software_name="t", client_software_version="1")


def flags(resp):
    return ({f.name: (f.min_version, f.max_version) for f in resp.supported_features},
            {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features})


async def test_features_and_their_epoch():
    async with Cluster(brokers=1, seed=1) as c:
        resp = await request_once(c, 1, REQ, 4)
        assert flags(resp) == (
            {"group.version": (0, 1), "kraft.version": (0, 0), "metadata.version": (7, 25),
             "transaction.version": (0, 0)},
            {"group.version": (1, 1), "metadata.version": (25, 25)})
        epoch = resp.finalized_features_epoch
        assert epoch == c.brokers[1].metadata.metadata_offset >= 0
        # v3: no supported range starting at 0 (KIP-1022); the finalized levels stay.
        v3 = await request_once(c, 1, REQ, 3)
        assert flags(v3) == ({"metadata.version": (7, 25)}, flags(resp)[1])
        # A metadata change moves the epoch (the cached answer is not reused).
        await c.create_topic("t", 1, 1)
        await wait_until(lambda: c.brokers[1].metadata.metadata_offset > epoch)
        assert (await request_once(c, 1, REQ, 4)).finalized_features_epoch > epoch


@pytest.mark.parametrize("release", ["2.8", "3.9"])
async def test_an_emulated_older_release_reports_no_features(release):
    async with Cluster(brokers=1, seed=1, kafka_version=release) as c:
        resp = await request_once(c, 1, REQ, 3)
        assert (resp.supported_features, resp.finalized_features) == ([], [])
