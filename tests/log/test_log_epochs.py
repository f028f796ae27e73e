from __future__ import annotations

import pytest

from minibroker.log.epochs import EpochEntry, LeaderEpochCache


def cache(*entries) -> LeaderEpochCache:
    c = LeaderEpochCache()
    for e, s in entries:
        c.assign(e, s)
    return c


def test_assign_is_monotonic_and_idempotent():
    c = cache((1, 0), (3, 10))
    assert not c.assign(3, 15)                # same epoch, later start: nothing to do
    assert c.entries == (EpochEntry(1, 0), EpochEntry(3, 10))
    assert c.assign(3, 5)                     # same epoch, earlier start: replaces
    assert c.entries == (EpochEntry(1, 0), EpochEntry(3, 5))
    assert c.assign(2, 20)                    # lower epoch removes the larger ones
    assert c.entries == (EpochEntry(1, 0), EpochEntry(2, 20))
    assert c.assign(5, 0)                     # earlier start removes the later-starting entries
    assert c.entries == (EpochEntry(5, 0),)
    assert c.latest_epoch == 5 and c.earliest_epoch == 5
    with pytest.raises(ValueError):
        c.assign(-1, 0)


def test_end_offset_for():
    c = cache((1, 0), (3, 10), (6, 25))
    assert c.end_offset_for(6, 40) == (6, 40)          # latest: the LEO
    assert c.end_offset_for(3, 40) == (3, 25)
    assert c.end_offset_for(1, 40) == (1, 10)
    assert c.end_offset_for(4, 40) == (3, 25)          # unknown, between: largest epoch <= requested
    assert c.end_offset_for(5, 40) == (3, 25)
    assert c.end_offset_for(7, 40) == (-1, -1)         # newer than any
    assert c.end_offset_for(-1, 40) == (-1, -1)
    assert cache((2, 5)).end_offset_for(1, 9) == (1, 5)  # older than the first: Kafka's answer
    assert LeaderEpochCache().end_offset_for(0, 9) == (-1, -1)


def test_truncate_from_end():
    c = cache((1, 0), (3, 10), (6, 25))
    c.truncate_from_end(26)
    assert len(c) == 3
    c.truncate_from_end(25)
    assert c.entries == (EpochEntry(1, 0), EpochEntry(3, 10))
    c.truncate_from_end(3)
    assert c.entries == (EpochEntry(1, 0),)


def test_truncate_from_start():
    c = cache((1, 0), (3, 10), (6, 25))
    c.truncate_from_start(0)
    assert c.entries == (EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(6, 25))
    c.truncate_from_start(12)
    assert c.entries == (EpochEntry(3, 12), EpochEntry(6, 25))
    c.truncate_from_start(25)
    assert c.entries == (EpochEntry(6, 25),)
    c.truncate_from_start(30)
    assert c.entries == (EpochEntry(6, 30),)


def test_epoch_for_offset():
    c = cache((1, 5), (3, 10))
    assert [c.epoch_for_offset(o) for o in (0, 5, 9, 10, 99)] == [-1, 1, 1, 3, 3]
