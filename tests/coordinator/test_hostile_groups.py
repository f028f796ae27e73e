"""A JoinGroup listing the same protocol twice (issue 25, item 5) is accepted as Kafka does (its
member's protocols are a set; the first entry's metadata counts), and the group keeps rebalancing
for the other members instead of tripping an assert. A real 3-broker cluster over loopback."""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.consumer import SyncGroupRequest

from minibroker.cluster import Cluster
from test_classic_group_cluster import connect, find_coordinator, join_req

GROUP = "cg"
_Asg = SyncGroupRequest.SyncGroupRequestAssignment


@pytest.mark.timeout(60)
async def test_join_group_with_a_protocol_listed_twice_still_rebalances():
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as c:
        coord = await find_coordinator(c, via=1)
        a = await connect(c, coord, "a")
        b = await connect(c, coord, "b")
        twice = (("range", b"first"), ("range", b"second"))
        r = await a.request(join_req(protocols=twice), 3)
        assert (r.error_code, r.generation_id, r.protocol_name) == (0, 1, "range")
        ma = r.member_id
        assert [(m.member_id, m.metadata) for m in r.members] == [(ma, b"first")]
        r = await a.request(SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=ma,
                                             assignments=[_Asg(member_id=ma, assignment=b"A")]), 3)
        assert r.error_code == 0
        # Another member joins: the rebalance completes for both.
        jb = asyncio.ensure_future(b.request(join_req(), 3))
        await asyncio.sleep(0.05)
        ja = await a.request(join_req(ma, protocols=twice), 3)
        jb = await jb
        assert (ja.error_code, jb.error_code) == (0, 0)
        assert ja.generation_id == jb.generation_id == 2
        assert ja.protocol_name == jb.protocol_name == "range"
        assert sorted(m.metadata for m in ja.members) == [b"first", b"sub"]
        a.close()
        b.close()
