"""KIP-227 over the wire: a full session fetch, then incremental fetches that carry and return
only what changed; a wrong epoch or an unknown session is refused; epoch -1 closes."""
from __future__ import annotations

from kafka.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from kafka.protocol.consumer import FetchRequest

from minibroker.cluster import Cluster
from minibroker.log.batch import build_batch
from minibroker.network.client import KafkaClientConnection

T, P, F = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition, FetchRequest.ForgottenTopic


def fetch(sid, epoch, parts=(), forgotten=()):
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=sid, session_epoch=epoch,
        topics=[T(topic="t", partitions=[P(partition=p, current_leader_epoch=-1, fetch_offset=o,
                                           last_fetched_epoch=-1, log_start_offset=-1,
                                           partition_max_bytes=1 << 20)]) for p, o in parts],
        forgotten_topics_data=[F(topic="t", partitions=[p]) for p in forgotten], rack_id="")


def summary(resp):
    return sorted((t.topic, p.partition_index, p.error_code, p.high_watermark, len(p.records or b""))
                  for t in resp.responses for p in t.partitions)


async def test_incremental_session_returns_only_news():
    async with Cluster(brokers=1) as c:
        await c.create_topic("t", 2, 1)
        b = c.brokers[1]
        conn = await KafkaClientConnection.connect(b.host, b.port)
        p0 = b.replica_manager.get("t", 0)
        p0.log.append_as_leader(build_batch([(b"k", b"v", [])]), p0.leader_epoch)
        p0.maybe_increment_high_watermark()
        resp = await conn.request(fetch(0, 0, [(0, 0), (1, 0)]), 12)
        sid = resp.session_id
        assert sid > 0 and resp.error_code == 0
        assert [s[:4] for s in summary(resp)] == [("t", 0, 0, 1), ("t", 1, 0, 0)]
        # The client moves partition 0 past its record: nothing is news.
        resp = await conn.request(fetch(sid, 1, [(0, 1)]), 12)
        assert (resp.session_id, summary(resp)) == (sid, [])
        # Partition 1 gets a record: only partition 1 is news, with no partition in the request.
        p1 = b.replica_manager.get("t", 1)
        p1.log.append_as_leader(build_batch([(b"k", b"w", [])]), p1.leader_epoch)
        p1.maybe_increment_high_watermark()
        resp = await conn.request(fetch(sid, 2), 12)
        assert [s[:4] for s in summary(resp)] == [("t", 1, 0, 1)] and summary(resp)[0][4] > 0
        # Forgotten partitions leave the session.
        resp = await conn.request(fetch(sid, 3, [(1, 1)], forgotten=[0]), 12)
        assert summary(resp) == []
        assert list(b.fetch_sessions._sessions[sid].partitions) == [("t", 1)]
        resp = await conn.request(fetch(sid, 3), 12)
        assert (resp.error_code, resp.session_id) == (InvalidFetchSessionEpochError.errno, 0)
        resp = await conn.request(fetch(sid + 1, 1), 12)
        assert resp.error_code == FetchSessionIdNotFoundError.errno
        resp = await conn.request(fetch(sid, -1, [(1, 0)]), 12)       # close: sessionless full
        assert (resp.error_code, resp.session_id, len(b.fetch_sessions)) == (0, 0, 0)
        conn.close()
