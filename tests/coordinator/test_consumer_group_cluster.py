"""KIP-848 over the wire on a 3-broker in-process cluster (virtual time): when the coordinator's
broker stops, the new coordinator replays the group from __consumer_offsets, keeps its group
epoch, assignment epoch and MetadataHash, and the members' next heartbeats do not bump."""
from __future__ import annotations

import asyncio

import kafka.errors as Errors
import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection
from minibroker.protocol.messages import (ConsumerGroupDescribeRequest,
                                          ConsumerGroupHeartbeatRequest)
from tests.cluster_helpers import request_once

GROUP = "kip848"
_TP = ConsumerGroupHeartbeatRequest.TopicPartitions
RETRY = {Errors.NotCoordinatorError.errno, Errors.CoordinatorLoadInProgressError.errno,
         Errors.CoordinatorNotAvailableError.errno}


async def find_coordinator(c: Cluster, not_: int | None = None) -> int:
    for _ in range(400):
        for b in c.brokers.values():
            if not b.running:
                continue
            r = await request_once(c, b.node_id, FindCoordinatorRequest(key=GROUP, key_type=0), 3,
                                   client_id="t")
            if r.error_code == 0 and r.node_id != not_:
                return r.node_id
            break
        await asyncio.sleep(0.05)
    raise AssertionError("no coordinator")


async def heartbeat(c: Cluster, node: int, member: str, epoch: int, owned=None, **kw):
    b = c.brokers[node]
    conn = await KafkaClientConnection.connect(b.host, b.port, client_id=member)
    try:
        for _ in range(400):
            req = ConsumerGroupHeartbeatRequest(
                group_id=GROUP, member_id=member, member_epoch=epoch,
                topic_partitions=None if owned is None else
                [_TP(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(owned.items())],
                **kw)
            r = await conn.request(req, 1)
            if r.error_code not in RETRY:
                return r
            await asyncio.sleep(0.05)
    finally:
        conn.close()
    raise AssertionError(f"heartbeat kept failing: {r}")


async def describe(c: Cluster, node: int):
    r = await request_once(c, node, ConsumerGroupDescribeRequest(
        group_ids=[GROUP], include_authorized_operations=False), 1, client_id="d")
    [g] = r.groups
    return g


@pytest.mark.timeout(60)
async def test_coordinator_failover_replays_group_without_bump():
    async with Cluster(brokers=3, racks=("r1", "r2", "r3"),
                       group_initial_rebalance_delay_ms=0) as c:
        await c.create_topic("t", 6, 3)
        coord = await find_coordinator(c)
        owned: dict[str, dict] = {}
        epochs = {}
        for m in ("m1", "m2", "m3"):
            r = await heartbeat(c, coord, m, 0, owned={}, rebalance_timeout_ms=30_000,
                                subscribed_topic_names=["t"], rack_id=f"r{m[1]}")
            assert r.error_code == 0, r
            epochs[m] = r.member_epoch
            owned[m] = {tp.topic_id: set(tp.partitions) for tp in r.assignment.topic_partitions}
        # Heartbeat (acknowledging revocations) until every member is at the group epoch.
        for _ in range(10):
            for m in ("m1", "m2", "m3"):
                r = await heartbeat(c, coord, m, epochs[m], owned=owned[m])
                assert r.error_code == 0, r
                epochs[m] = r.member_epoch
                if r.assignment is not None:
                    owned[m] = {tp.topic_id: set(tp.partitions)
                                for tp in r.assignment.topic_partitions}
            g = await describe(c, coord)
            if g.group_state == "Stable":
                break
        assert (g.error_code, g.group_state, g.group_epoch) == (0, "Stable", 3)
        assert sorted(len(ps) for o in owned.values() for ps in o.values()) == [2, 2, 2]
        shard, _ = c.brokers[coord].groups.shard_for(GROUP)
        before = shard.consumer_groups[GROUP]
        snapshot = (before.group_epoch, before.assignment_epoch, before.metadata_hash,
                    dict(before.target_assignment))

        await c.stop_broker(coord)
        new = await find_coordinator(c, not_=coord)
        for m in ("m1", "m2", "m3"):
            r = await heartbeat(c, new, m, epochs[m], owned=owned[m])
            assert (r.error_code, r.member_epoch) == (0, epochs[m]), r
        shard, _ = c.brokers[new].groups.shard_for(GROUP)
        after = shard.consumer_groups[GROUP]
        assert (after.group_epoch, after.assignment_epoch, after.metadata_hash,
                after.target_assignment) == snapshot
        g = await describe(c, new)
        assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Stable", 3, 3)
        assert sorted(m.member_id for m in g.members) == ["m1", "m2", "m3"]
        assert {m.member_id: m.rack_id for m in g.members} == {"m1": "r1", "m2": "r2",
                                                               "m3": "r3"}
