"""Replication on a real in-process cluster, on virtual time: acks, min.insync.replicas, ISR
shrink and expansion, high watermark, leader failover with epoch bumps, truncation of a returning
leader's divergent suffix, ListOffsets.

Followers are stalled through the one fault interception point (a Fetch control answering the
follower's fetches with an error), never by monkeypatching.
"""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import (NotEnoughReplicasError, NotLeaderForPartitionError,
                          RequestTimedOutError, KafkaStorageError)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse

from cluster_helpers import (batch, connect, fetch_request, fetched_records, list_offsets_request,
                             log_bytes, log_records, produce_each, produce_request,
                             produce_response, until_partition, wait_for_isr, wait_until, wire)
from minibroker.cluster import Cluster

LAG_MS = 10_000
T = "t"


class FetchStall:
    """Answers chosen followers' replica fetches with an error (their fetchers back off and
    retry), through `cluster.faults.control(ApiKey.Fetch, ...)`; `lift()` lets them through."""

    def __init__(self, c: Cluster, followers: set[int], served_by: int | None = None) -> None:
        self.followers = set(followers)
        self.served_by = served_by
        self.stalled = 0
        self.stalled_ids: set[int] = set()
        c.faults.control(ApiKey.Fetch, self)

    @classmethod
    async def engage(cls, c: Cluster, followers: set[int], served_by: int | None = None
                     ) -> "FetchStall":
        """Install the stall and wait until each follower has had a fetch refused: a fetcher has
        one request in flight, so the long poll it had open before is over by then."""
        stall = cls(c, followers, served_by)
        await wait_until(lambda: stall.stalled_ids >= stall.followers, what="stalled fetchers")
        return stall

    def __call__(self, req, ctx):
        if not self.followers or req.replica_id not in self.followers:
            return None
        if self.served_by is not None and ctx.node_id != self.served_by:
            return None
        self.stalled += 1
        self.stalled_ids.add(req.replica_id)
        return FetchResponse(throttle_time_ms=0, error_code=KafkaStorageError.errno, session_id=0,
                             responses=[])

    def lift(self) -> None:
        self.followers = set()


async def rf3_cluster(**config) -> Cluster:
    c = Cluster(brokers=3, replica_lag_time_max_ms=LAG_MS, **config)
    await c.start()
    return c


async def settle(c: Cluster, topic: str = T, partition: int = 0) -> dict:
    """Until every replica in the ISR has the leader's log end offset and high watermark."""
    async def done():
        st = await c.partition_state(topic, partition)
        ends = {(st["logs"][r]["log_end_offset"], st["logs"][r]["high_watermark"])
                for r in st["isr"]}
        return st if len(ends) == 1 and len(set(next(iter(ends)))) == 1 else None
    return await until_partition(c, topic, partition, done)


# In one process brokers replicate over memory pipes by default; the same tests over loopback TCP
# (minibroker.inter.broker.sockets=true), as between `serve --processes` brokers.
@pytest.fixture(params=[False, True], ids=["memory", "tcp"])
async def c(request):
    cluster = await rf3_cluster(minibroker_inter_broker_sockets=request.param)
    try:
        await cluster.create_topic(T, 1, 3)
        yield cluster
    finally:
        await cluster.stop()


# ---------------------------------------------------------------------- acks
async def test_acks_all_answers_once_every_isr_replica_has_the_batch(c):
    leader = await c.leader_of(T, 0)
    conn = await connect(c, leader)
    now = c.clock.now_ms()
    for i in range(3):
        resp = await conn.request(produce_request(T, 0, batch([b"a%d" % i, b"b%d" % i], now)), 9)
        assert resp == wire(produce_response(T, 0, base_offset=2 * i, log_start_offset=0), 9)
        st = await c.partition_state(T, 0)
        assert st["logs"][leader]["high_watermark"] == 2 * i + 2
        # acks=all returned only after every ISR replica fetched the batch
        assert all(st["logs"][r]["log_end_offset"] == 2 * i + 2 for r in st["isr"])
    conn.close()


async def test_acks_one_answers_on_leader_append_even_with_followers_stalled(c):
    leader = await c.leader_of(T, 0)
    followers = {r for r in (1, 2, 3) if r != leader}
    stall = await FetchStall.engage(c, followers)
    conn = await connect(c, leader)
    resp = await conn.request(produce_request(T, 0, batch([b"x"], c.clock.now_ms()), acks=1), 9)
    assert resp == wire(produce_response(T, 0, base_offset=0, log_start_offset=0), 9)
    st = await c.partition_state(T, 0)
    assert (st["logs"][leader]["log_end_offset"], st["logs"][leader]["high_watermark"]) == (1, 0)
    assert all(st["logs"][f]["log_end_offset"] == 0 for f in followers)
    stall.lift()
    st = await settle(c)
    assert st["logs"][leader]["high_watermark"] == 1
    conn.close()


async def test_acks_zero_gets_no_response_and_the_connection_stays_in_step(c):
    leader = await c.leader_of(T, 0)
    conn = await connect(c, leader)
    now = c.clock.now_ms()
    assert await conn.request(produce_request(T, 0, batch([b"z0"], now), acks=0), 9) is None
    assert await conn.request(produce_request(T, 0, batch([b"z1"], now), acks=0), 9) is None
    # the next response on the same connection matches its own request
    resp = await conn.request(produce_request(T, 0, batch([b"z2"], now), acks=1), 9)
    assert resp == wire(produce_response(T, 0, base_offset=2, log_start_offset=0), 9)
    await settle(c)
    assert log_records(c, leader, T, 0) == [(0, b"z0"), (1, b"z1"), (2, b"z2")]
    conn.close()


async def test_acks_all_times_out_while_the_isr_is_stalled(c):
    leader = await c.leader_of(T, 0)
    await FetchStall.engage(c, {r for r in (1, 2, 3) if r != leader})
    conn = await connect(c, leader)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    resp = await conn.request(produce_request(T, 0, batch([b"x"], c.clock.now_ms()),
                                              timeout_ms=1000), 9)
    assert resp == wire(produce_response(T, 0, RequestTimedOutError.errno, base_offset=-1,
                                         log_start_offset=0), 9)
    assert 1.0 <= loop.time() - t0 < 1.1
    # the record stays in the leader's log (Kafka: a timeout is not a rollback), above the HW
    st = await c.partition_state(T, 0)
    assert (st["logs"][leader]["log_end_offset"], st["logs"][leader]["high_watermark"]) == (1, 0)
    conn.close()


async def test_invalid_acks_value(c):
    conn = await connect(c, await c.leader_of(T, 0))
    resp = await conn.request(produce_request(T, 0, batch([b"x"], c.clock.now_ms()), acks=2), 9)
    assert resp == wire(produce_response(T, 0, 21), 9)    # INVALID_REQUIRED_ACKS
    conn.close()


async def test_produce_to_a_follower_is_not_leader(c):
    leader = await c.leader_of(T, 0)
    follower = next(r for r in (1, 2, 3) if r != leader)
    conn = await connect(c, follower)
    resp = await conn.request(produce_request(T, 0, batch([b"x"], c.clock.now_ms())), 9)
    assert resp == wire(produce_response(T, 0, NotLeaderForPartitionError.errno), 9)
    conn.close()


# ---------------------------------------------------------------------- min.insync.replicas
async def test_min_insync_replicas_with_a_stopped_follower_is_not_enough_replicas():
    c = await rf3_cluster()
    try:
        await c.create_topic(T, 1, 3, configs={"min.insync.replicas": "3"})
        leader = await c.leader_of(T, 0)
        conn = await connect(c, leader)
        now = c.clock.now_ms()
        resp = await conn.request(produce_request(T, 0, batch([b"ok"], now)), 9)
        assert resp == wire(produce_response(T, 0, base_offset=0, log_start_offset=0), 9)

        follower = max(r for r in (1, 2, 3) if r != leader)
        await c.stop_broker(follower)           # the controller fences it and shrinks the ISR
        isr = tuple(r for r in (await c.partition_state(T, 0))["replicas"] if r != follower)
        await wait_for_isr(c, T, 0, set(isr))

        resp = await conn.request(produce_request(T, 0, batch([b"refused"], now)), 9)
        assert resp == wire(produce_response(
            T, 0, NotEnoughReplicasError.errno,
            error_message=f"ISR {list(isr)} is smaller than min.insync.replicas=3"), 9)
        # acks=1 does not look at min.insync.replicas
        resp = await conn.request(produce_request(T, 0, batch([b"one"], now), acks=1), 9)
        assert resp == wire(produce_response(T, 0, base_offset=1, log_start_offset=0), 9)

        await c.start_broker(follower)          # it catches up and rejoins; acks=all works again
        await wait_for_isr(c, T, 0, {1, 2, 3})
        resp = await conn.request(produce_request(T, 0, batch([b"again"], now)), 9)
        assert resp == wire(produce_response(T, 0, base_offset=2, log_start_offset=0), 9)
        assert log_records(c, follower, T, 0) == [(0, b"ok"), (1, b"one"), (2, b"again")]
        conn.close()
    finally:
        await c.stop()


# ---------------------------------------------------------------------- ISR shrink / expand
async def test_isr_shrinks_after_replica_lag_time_and_expands_when_caught_up(c):
    loop = asyncio.get_running_loop()
    leader = await c.leader_of(T, 0)
    lagging = max(r for r in (1, 2, 3) if r != leader)
    st0 = await c.partition_state(T, 0)
    stall = await FetchStall.engage(c, {lagging})
    conn = await connect(c, leader)
    now = c.clock.now_ms()
    t0 = loop.time()
    # acks=all waits for the lagging replica, until the leader drops it from the ISR
    resp = await conn.request(produce_request(T, 0, batch([b"r0"], now), timeout_ms=60_000), 9,
                              timeout=120)
    shrunk_after = loop.time() - t0
    assert resp == wire(produce_response(T, 0, base_offset=0, log_start_offset=0), 9)
    assert LAG_MS / 1000 <= shrunk_after <= 2 * LAG_MS / 1000, shrunk_after
    assert stall.stalled > 0
    st = await wait_for_isr(c, T, 0, {1, 2, 3} - {lagging})
    assert st["partition_epoch"] > st0["partition_epoch"]
    assert st["leader_epoch"] == st0["leader_epoch"]         # an ISR change is not a new term
    assert st["logs"][lagging]["log_end_offset"] == 0

    # more records while it is out; then it fetches again, catches up and rejoins
    await produce_each(conn, T, [b"r%d" % i for i in range(1, 4)], now, first_offset=1)
    stall.lift()
    st = await wait_for_isr(c, T, 0, {1, 2, 3})
    st = await settle(c)
    assert st["logs"][lagging]["log_end_offset"] == 4
    assert log_bytes(c, lagging, T, 0) == log_bytes(c, leader, T, 0)
    conn.close()


async def test_acks_all_waits_for_a_replica_whose_isr_addition_is_in_flight(c):
    """KIP-497's maximal ISR: once the leader asks the controller to add a caught-up replica, the
    controller may count it in (and elect it) before the leader hears back; so the high
    watermark, and acks=all, must wait for that replica as well."""
    leader = await c.leader_of(T, 0)
    lagging = max(r for r in (1, 2, 3) if r != leader)
    stall = await FetchStall.engage(c, {lagging})
    await wait_for_isr(c, T, 0, {1, 2, 3} - {lagging})
    await c.stop_controller()               # the expansion request will wait for a controller
    stall.lift()
    p = c.brokers[leader].replica_manager.get(T, 0)
    await wait_until(lambda: lagging in p.pending_isr, what="ISR expansion in flight")
    stall = await FetchStall.engage(c, {lagging})
    conn = await connect(c, leader)
    resp = await conn.request(produce_request(T, 0, batch([b"x"], c.clock.now_ms()),
                                              timeout_ms=2000), 9)
    assert resp == wire(produce_response(T, 0, RequestTimedOutError.errno, base_offset=-1,
                                         log_start_offset=0), 9)
    assert p.high_watermark == 0
    await c.start_controller()              # resends the old ISR, then commits the expansion
    st = await wait_for_isr(c, T, 0, {1, 2, 3})
    assert st["logs"][leader]["high_watermark"] == 0
    stall.lift()
    st = await settle(c)
    assert st["logs"][leader]["high_watermark"] == 1
    conn.close()


def test_resent_leader_and_isr_keeps_the_pending_isr():
    """Only a newer partition epoch answers an AlterPartition; the same state sent again (a
    broker registering, a new controller's full sync) must not drop the pending additions."""
    from minibroker.broker.partition import Partition
    from minibroker.clock import Clock
    from minibroker.log.config import LogConfig
    from minibroker.log.partition_log import PartitionLog

    clock = Clock(wall_base_ms=0)
    p = Partition(1, T, None, 0, PartitionLog(T, 0, LogConfig(), clock), clock,
                  request_isr_change=lambda p, isr: None)
    p.make_leader(3, 7, (1, 2), (1, 2, 3))
    p.log.append_as_leader(batch([b"a", b"b"], 0), 3)
    p.isr_change_in_flight, p.pending_isr = True, (1, 2, 3)
    p.update_follower_fetch(2, 2, 0)
    assert p.high_watermark == 0                 # replica 3 is being added and has nothing
    p.make_leader(3, 7, (1, 2), (1, 2, 3))       # resent: still pending
    assert (p.pending_isr, p.isr_change_in_flight, p.high_watermark) == ((1, 2, 3), True, 0)
    p.followers[3].log_end_offset = 2
    p.make_leader(3, 8, (1, 2, 3), (1, 2, 3))    # the change itself
    assert (p.pending_isr, p.isr_change_in_flight, p.high_watermark) == ((), False, 2)


# ---------------------------------------------------------------------- high watermark
async def test_consumers_never_see_above_the_high_watermark(c):
    loop = asyncio.get_running_loop()
    leader = await c.leader_of(T, 0)
    conn = await connect(c, leader)
    now = c.clock.now_ms()
    assert (await conn.request(produce_request(T, 0, batch([b"c0"], now)), 9)).responses[0] \
        .partition_responses[0].error_code == 0
    await settle(c)
    stall = await FetchStall.engage(c, {r for r in (1, 2, 3) if r != leader})
    resp = await conn.request(produce_request(T, 0, batch([b"u1", b"u2"], now), acks=1), 9)
    assert resp == wire(produce_response(T, 0, base_offset=1, log_start_offset=0), 9)

    resp = await conn.request(fetch_request(T, 0, 0), 12)
    assert fetched_records(resp) == [(0, b"c0")]
    assert resp.responses[0].partitions[0].high_watermark == 1
    # at the HW: a long poll waits its max_wait and returns nothing
    t0 = loop.time()
    resp = await conn.request(fetch_request(T, 0, 1, max_wait_ms=5000), 12)
    assert fetched_records(resp) == []
    assert 5.0 <= loop.time() - t0 < 5.1
    # a waiting consumer is woken when the HW moves
    waiting = conn.send(fetch_request(T, 0, 1, max_wait_ms=60_000), 12)
    await asyncio.sleep(1)
    assert not waiting.done()
    t0 = loop.time()
    stall.lift()
    resp = await waiting
    assert loop.time() - t0 < 5
    assert fetched_records(resp) == [(1, b"u1"), (2, b"u2")]
    assert resp.responses[0].partitions[0].high_watermark == 3
    conn.close()


async def test_fetch_past_the_log_end_is_out_of_range(c):
    conn = await connect(c, await c.leader_of(T, 0))
    resp = await conn.request(fetch_request(T, 0, 5), 12)
    P = FetchResponse.FetchableTopicResponse.PartitionData
    assert resp == wire(FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        FetchResponse.FetchableTopicResponse(topic=T, partitions=[P(
            partition_index=0, error_code=1, high_watermark=0, last_stable_offset=-1,
            log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
            records=b"")])]), 12)       # empty, as Kafka's MemoryRecords.EMPTY: never null
    conn.close()


# ---------------------------------------------------------------------- ListOffsets
def list_offsets_response(offset: int, timestamp: int = -1, leader_epoch: int = 0,
                          error_code: int = 0) -> ListOffsetsResponse:
    Tp = ListOffsetsResponse.ListOffsetsTopicResponse
    return ListOffsetsResponse(throttle_time_ms=0, topics=[Tp(name=T, partitions=[
        Tp.ListOffsetsPartitionResponse(partition_index=0, error_code=error_code,
                                        old_style_offsets=[], timestamp=timestamp,
                                        offset=offset, leader_epoch=leader_epoch)])])


async def test_list_offsets_earliest_latest_and_by_timestamp(c):
    leader = await c.leader_of(T, 0)
    conn = await connect(c, leader)
    base = c.clock.now_ms()
    for i in range(3):      # offsets 2i, 2i+1 with timestamps base + 1000 i
        resp = await conn.request(produce_request(T, 0, batch([b"a", b"b"], base + 1000 * i)), 9)
        assert resp.responses[0].partition_responses[0].base_offset == 2 * i

    async def lookup(ts):
        return await conn.request(list_offsets_request(T, 0, ts), 7)

    assert await lookup(-2) == wire(list_offsets_response(0), 7)          # earliest
    assert await lookup(-1) == wire(list_offsets_response(6), 7)          # latest = HW
    assert await lookup(base + 500) == wire(list_offsets_response(2, base + 1000), 7)
    assert await lookup(base + 1000) == wire(list_offsets_response(2, base + 1000), 7)
    assert await lookup(base) == wire(list_offsets_response(0, base), 7)
    assert await lookup(base + 10_000) == wire(list_offsets_response(-1, -1, -1), 7)
    assert await lookup(-3) == wire(list_offsets_response(4, base + 2000), 7)   # max timestamp

    # records above the HW are invisible to ListOffsets too
    await FetchStall.engage(c, {r for r in (1, 2, 3) if r != leader})
    resp = await conn.request(produce_request(T, 0, batch([b"late"], base + 5000), acks=1), 9)
    assert resp.responses[0].partition_responses[0].base_offset == 6
    assert await lookup(-1) == wire(list_offsets_response(6), 7)
    assert await lookup(base + 5000) == wire(list_offsets_response(-1, -1, -1), 7)
    conn.close()


async def test_list_offsets_debugging_replica_id_reads_a_follower(c):
    """Kafka's fetchOnlyFromLeader: replica id -2 (debugging) gets a follower's own log bounds
    (the KIP-179 progress report reads new replicas this way); a client gets NOT_LEADER there."""
    leader = await c.leader_of(T, 0)
    conn = await connect(c, leader)
    resp = await conn.request(produce_request(T, 0, batch([b"a", b"b", b"c"], c.clock.now_ms())), 9)
    assert resp.responses[0].partition_responses[0].error_code == 0
    conn.close()
    await settle(c)
    follower = next(r for r in (await c.partition_state(T, 0))["replicas"] if r != leader)
    conn = await connect(c, follower)
    req = list_offsets_request(T, 0, -1)
    resp = await conn.request(req, 7)
    assert resp.topics[0].partitions[0].error_code == NotLeaderForPartitionError.errno
    req.replica_id = -2
    assert await conn.request(req, 7) == wire(list_offsets_response(3), 7)
    conn.close()


# ---------------------------------------------------------------------- failover
async def test_leader_replaced_before_appending_anything_follows_the_next_one(c):
    """Leadership moves A -> B -> C with no write in B's epoch: C never learns that epoch, B's
    cache still starts it at its log end. B must drop that entry (Kafka's truncateTo always
    truncates the epoch cache) instead of sending it as last_fetched_epoch forever."""
    loop = asyncio.get_running_loop()
    a = await c.leader_of(T, 0)
    conn = await connect(c, a)
    now = c.clock.now_ms()
    resp = await conn.request(produce_request(T, 0, batch([b"e0"], now)), 9)
    assert resp == wire(produce_response(T, 0, base_offset=0, log_start_offset=0), 9)
    conn.close()
    await settle(c)
    b, cc = (r for r in (await c.partition_state(T, 0))["replicas"] if r != a)
    assert await c.move_leader(T, 0, b) == b
    await wait_until(lambda: c.brokers[b].replica_manager.get(T, 0).is_leader, what="b leads")
    assert await c.move_leader(T, 0, cc) == cc
    await wait_until(lambda: c.brokers[cc].replica_manager.get(T, 0).is_leader, what="c leads")
    epoch = (await c.partition_state(T, 0))["leader_epoch"]

    conn = await connect(c, cc)
    t0 = loop.time()
    resp = await conn.request(produce_request(T, 0, batch([b"e2"], now)), 9)
    assert resp == wire(produce_response(T, 0, base_offset=1, log_start_offset=0), 9)
    assert loop.time() - t0 < 5
    conn.close()
    await settle(c)
    for r in (1, 2, 3):
        log = c.brokers[r].replica_manager.get(T, 0).log
        assert [e.epoch for e in log.epochs.entries] == [epoch - 2, epoch], (r, log.epochs)
        assert log_bytes(c, r, T, 0) == log_bytes(c, cc, T, 0)


def test_follower_truncates_to_where_both_logs_agree():
    """Kafka's getOffsetTruncationState: the leader says its epoch 0 ends at 5; our epoch 0 ended
    at 3 (we led epoch 1 from there): truncate to 3, not 5 — offsets 3-4 of ours are epoch 1's."""
    from types import SimpleNamespace

    from minibroker.broker.fetcher import ReplicaFetcher
    from minibroker.log.config import LogConfig
    from minibroker.log.partition_log import PartitionLog

    log = PartitionLog(T, 0, LogConfig(), None)
    for v in (b"a", b"b", b"c"):
        log.append_as_leader(batch([v], 0), 0)
    log.append_as_leader(batch([b"d", b"e", b"f", b"g", b"h"], 0), 1)
    p = SimpleNamespace(log=log, high_watermark=2)
    assert ReplicaFetcher._truncate_on_divergence(p, 0, 5) is True
    assert (log.log_end_offset, log.epochs.entries) == (3, ((0, 0),))
    # the same answer again changes nothing (and says so: the fetcher then backs off)
    assert ReplicaFetcher._truncate_on_divergence(p, 0, 5) is False
    # a leader that knows no epoch at or below ours: truncate to the high watermark
    assert ReplicaFetcher._truncate_on_divergence(p, -1, -1) is True
    assert (log.log_end_offset, log.epochs.entries) == (2, ((0, 0),))



async def test_stopped_leader_is_replaced_with_a_bumped_epoch_and_acked_records_survive(c):
    leader = await c.leader_of(T, 0)
    st0 = await c.partition_state(T, 0)
    conn = await connect(c, leader)
    now = c.clock.now_ms()
    acked = [(i, b"v%d" % i) for i in range(5)]
    await produce_each(conn, T, [v for _, v in acked], now)
    conn.close()

    await c.stop_broker(leader)
    st = await c.partition_state(T, 0)
    new = st["leader"]
    assert new not in (leader, -1)
    assert st["leader_epoch"] == st0["leader_epoch"] + 1
    assert leader not in st["isr"]
    await c.wait_for_leaders(T)
    await wait_until(lambda: c.brokers[new].replica_manager.get(T, 0).is_leader, what="new leader")
    assert c.brokers[new].replica_manager.get(T, 0).leader_epoch == st0["leader_epoch"] + 1

    conn = await connect(c, new)
    resp = await conn.request(fetch_request(T, 0, 0, current_leader_epoch=st["leader_epoch"]), 12)
    assert fetched_records(resp) == acked
    # the old epoch is fenced on the new leader
    resp = await conn.request(fetch_request(T, 0, 0, current_leader_epoch=st0["leader_epoch"]),
                              12)
    assert resp.responses[0].partitions[0].error_code == 74         # FENCED_LEADER_EPOCH
    resp = await conn.request(produce_request(T, 0, batch([b"v5"], now)), 9)
    assert resp == wire(produce_response(T, 0, base_offset=5, log_start_offset=0), 9)
    conn.close()

    await c.start_broker(leader)
    await wait_for_isr(c, T, 0, {1, 2, 3})
    await settle(c)
    assert log_records(c, leader, T, 0) == acked + [(5, b"v5")]


async def test_returning_old_leader_truncates_its_divergent_suffix(c):
    old = await c.leader_of(T, 0)
    conn = await connect(c, old)
    now = c.clock.now_ms()
    await produce_each(conn, T, [b"acked%d" % i for i in range(3)], now)
    await settle(c)

    # cut the followers off, then write a suffix only the old leader gets (acks=1)
    stall = await FetchStall.engage(c, {r for r in (1, 2, 3) if r != old}, served_by=old)
    for i in range(2):
        resp = await conn.request(produce_request(T, 0, batch([b"lost%d" % i, b"x"], now),
                                                  acks=1), 9)
        assert resp == wire(produce_response(T, 0, base_offset=3 + 2 * i, log_start_offset=0), 9)
    conn.close()
    assert c.brokers[old].replica_manager.get(T, 0).log.log_end_offset == 7

    await c.stop_broker(old)
    stall.lift()
    st = await c.partition_state(T, 0)
    new = st["leader"]
    assert new != old
    await wait_until(lambda: c.brokers[new].replica_manager.get(T, 0).is_leader, what="new leader")
    conn = await connect(c, new)
    for i in range(3):       # the new term writes different records at the same offsets
        resp = await conn.request(produce_request(T, 0, batch([b"new%d" % i], now)), 9)
        assert resp == wire(produce_response(T, 0, base_offset=3 + i, log_start_offset=0), 9)
    conn.close()

    await c.start_broker(old)
    await wait_for_isr(c, T, 0, {1, 2, 3})
    await settle(c)
    expected = [(0, b"acked0"), (1, b"acked1"), (2, b"acked2"),
                (3, b"new0"), (4, b"new1"), (5, b"new2")]
    assert log_records(c, old, T, 0) == expected
    assert log_bytes(c, old, T, 0) == log_bytes(c, new, T, 0)
    for r in (1, 2, 3):
        assert log_bytes(c, r, T, 0) == log_bytes(c, new, T, 0), r
        assert (c.brokers[r].replica_manager.get(T, 0).log.epochs.latest_epoch
                == st["leader_epoch"])


async def test_a_high_watermark_move_wakes_consumers_but_not_parked_followers():
    """Kafka's DelayedFetch for a follower completes on bytes past its fetch offset, not on a HW
    move: woken, the first follower of an RF 3 acks=all write answered an empty fetch and fetched
    again on every write (3 Fetch answers per write instead of 2: benchmarks/rf3_calls.py)."""
    from minibroker.broker.fetch_session import FollowerWaker
    from minibroker.broker.partition import Partition
    from minibroker.clock import Clock
    from minibroker.log.config import LogConfig
    from minibroker.log.partition_log import PartitionLog

    loop = asyncio.get_running_loop()
    clock = Clock(wall_base_ms=0)
    p = Partition(1, T, None, 0, PartitionLog(T, 0, LogConfig(), clock), clock,
                  request_isr_change=lambda p, isr: None)
    p.make_leader(3, 7, (1, 2, 3), (1, 2, 3))
    p.log.append_as_leader(batch([b"a"], 0), 3)
    p.update_follower_fetch(2, 1, 0)             # follower 2 has it; 3 has not: HW stays 0
    consumer, follower2 = loop.create_future(), loop.create_future()
    p.add_data_waiter(consumer)
    waker = FollowerWaker()                      # follower 2's fetch session's
    waker.fut = follower2
    p.add_data_waiter(waker, replica_id=2)       # parked at the log end
    p.update_follower_fetch(3, 1, 0)             # follower 3's fetch moves the HW
    assert p.high_watermark == 1
    assert consumer.done() and not follower2.done()
    p.log.append_as_leader(batch([b"b"], 0), 3)  # an append wakes every long poll
    p.notify_data()
    assert follower2.done()
