"""KIP-227 session bookkeeping: creation, incremental epochs, updates, forgetting, eviction."""
from __future__ import annotations

import random

from kafka.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from kafka.protocol.consumer import FetchRequest

from minibroker.broker.fetch_session import FetchSessionCache

T, P, F = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition, FetchRequest.ForgottenTopic


def req(sid, epoch, parts=(), forgotten=()):
    topics = {}
    for topic, pid, offset in parts:
        topics.setdefault(topic, []).append(P(partition=pid, current_leader_epoch=-1,
                                              fetch_offset=offset, last_fetched_epoch=-1,
                                              log_start_offset=-1, partition_max_bytes=100))
    return FetchRequest(session_id=sid, session_epoch=epoch,
                        topics=[T(topic=t, partitions=ps) for t, ps in topics.items()],
                        forgotten_topics_data=[F(topic=t, partitions=[p]) for t, p in forgotten])


def offsets(items):
    return [(t, sp.partition, sp.fetch_offset) for t, sp, _ in items]


def test_full_then_incremental_session_keeps_partitions_and_epochs():
    cache = FetchSessionCache(10, random.Random(1))
    err, s, inc, items = cache.resolve(req(0, 0, [("a", 0, 5), ("a", 1, 7)]))
    assert (err, inc, offsets(items)) == (0, False, [("a", 0, 5), ("a", 1, 7)])
    sid = s.session_id
    assert sid > 0 and s.epoch == 1
    err, s2, inc, items = cache.resolve(req(sid, 1, [("a", 1, 9)]))
    assert (err, s2 is s, inc, offsets(items)) == (0, True, True, [("a", 0, 5), ("a", 1, 9)])
    err, _, _, items = cache.resolve(req(sid, 2, [("b", 0, 0)], forgotten=[("a", 0)]))
    assert offsets(items) == [("a", 1, 9), ("b", 0, 0)]
    assert cache.resolve(req(sid, 2))[0] == InvalidFetchSessionEpochError.errno
    assert cache.resolve(req(sid + 1, 1))[0] == FetchSessionIdNotFoundError.errno


def test_changed_reports_only_moves():
    cache = FetchSessionCache(10, random.Random(1))
    _, s, _, _ = cache.resolve(req(0, 0, [("a", 0, 0)]))
    assert s.changed("a", 0, (10, 10, 0)) is True
    assert s.changed("a", 0, (10, 10, 0)) is False
    assert s.changed("a", 0, (11, 11, 0)) is True


def test_sessionless_and_closing_and_eviction():
    cache = FetchSessionCache(2, random.Random(1))
    assert cache.resolve(req(0, -1, [("a", 0, 0)]))[1] is None
    s1 = cache.resolve(req(0, 0, [("a", 0, 0)]))[1]
    s2 = cache.resolve(req(0, 0, [("a", 0, 0)]))[1]
    s3 = cache.resolve(req(0, 0, [("a", 0, 0)]))[1]           # evicts the least recently used
    assert len(cache) == 2
    assert cache.resolve(req(s1.session_id, 1))[0] == FetchSessionIdNotFoundError.errno
    err, _, inc, _ = cache.resolve(req(s3.session_id, -1, [("a", 0, 3)]))   # close it
    assert (err, inc, len(cache)) == (0, False, 1)
    assert cache.resolve(req(s2.session_id, 1))[0] == 0
    assert FetchSessionCache(0, random.Random(1)).resolve(req(0, 0, [("a", 0, 0)]))[1] is None
