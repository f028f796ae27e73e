"""The sink's vectorised path without Spark: murmur2 and KIP-253 linear hashing over whole columns
agree with minibroker.partitioning record by record; the record batches built from Arrow columns
decode back to the rows (null keys, headers, a codec); and a write during which the topic grows
2 -> 4 lands every row once, each key moving partition at most once and in order."""
from __future__ import annotations

import asyncio
import os
import random
import threading
import time

import pytest

pa = pytest.importorskip("pyarrow", reason="the spark extra is not installed: pip install -e '.[test,fast,spark]'")

from minibroker.client import Admin, TopicPartition
from minibroker.client.records import decode_records
from minibroker.partitioning import key_hash, partition_for_key
from minibroker.spark.encode import key_partitions, murmur2
from minibroker.spark.sink import _build, _Plan, _write, parse_sink
from test_sink import _read_all

pytestmark = pytest.mark.timeout(300)

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def test_vectorised_murmur2_and_linear_hashing_match_the_scalar_ones():
    seed = int.from_bytes(os.urandom(4), "big")
    print("seed", seed)
    rng = random.Random(seed)
    keys = [rng.randbytes(rng.randrange(0, 41)) for _ in range(5000)] + [b"", b"a", b"ab", b"abc"]
    arr = pa.array(keys, pa.binary())
    assert (murmur2(arr) & 0x7FFFFFFF).tolist() == [key_hash(k) for k in keys]
    for n, u in ((1, 1), (3, 3), (2, 3), (3, 7), (4, 8), (2, 5), (5, 19)):
        assert key_partitions(arr, n, u).tolist() == [partition_for_key(k, n, u) for k in keys]


@pytest.mark.parametrize("codec", [0, 1])
def test_record_batches_from_columns_decode_back_to_the_rows(codec):
    n = 3000
    keys = pa.array([None if i % 7 == 0 else b"k%d" % (i % 100) for i in range(n)], pa.binary())
    values = pa.array([None if i % 11 == 0 else "v%d" % i for i in range(n)])
    headers = pa.array([[{"key": "h", "value": b"x%d" % i}, {"key": "n", "value": None}]
                        if i % 10 == 0 else None for i in range(n)], HEADERS)
    rb = pa.RecordBatch.from_arrays([keys, values, headers], names=["key", "value", "headers"])
    plan = _Plan(rb, (2, 3), 3, 0, 2000)
    seen = []
    for p, count, data, idx in plan.batches():
        records, nxt = decode_records("t", p, _build(data, count, 123, codec, 5, 0, 10), 0)
        assert len(records) == count and nxt == count
        for r, i in zip(records, idx.tolist()):
            assert r.key == (None if i % 7 == 0 else b"k%d" % (i % 100))
            assert r.value == (None if i % 11 == 0 else b"v%d" % i)
            assert r.headers == ((("h", b"x%d" % i), ("n", None)) if i % 10 == 0 else ())
            assert r.timestamp == 123
            assert r.key is None or p == partition_for_key(r.key, 2, 3)
            seen.append(i)
    assert sorted(seen) == list(range(n))
    assert len(plan.starts) > 3                       # cut at ~2000 bytes


def _create_partitions(bootstrap: str, topic: str, count: int) -> None:
    async def go():
        async with Admin(bootstrap) as a:
            await a.create_partitions({topic: count})
    # a thread of its own: no event loop of the sink's is running in it, whichever thread pulls
    th = threading.Thread(target=lambda: asyncio.run(go()))
    th.start()
    th.join(60)


def test_write_while_the_topic_grows_lands_every_row_once_in_key_order(kafka):
    kafka.call(kafka.cluster.create_topic, "sink-grow", 2, 2)
    n, per = 20_000, 1000

    def batches():
        for s in range(0, n, per):
            if s == n // 2:
                _create_partitions(kafka.bootstrap, "sink-grow", 4)
            rows = range(s, s + per)
            yield pa.RecordBatch.from_arrays(
                [pa.array([b"k%d" % (i % 97) for i in rows]), pa.array([b"%d" % i for i in rows])],
                names=["key", "value"])

    opts = parse_sink({"kafka.bootstrap.servers": kafka.bootstrap, "topic": "sink-grow",
                       "kafka.batch.size": "4096"})
    commit = asyncio.run(_write(opts, batches()))
    assert commit.records == n
    got = _read_all(kafka.bootstrap, "sink-grow", n)
    assert sorted(int(v) for _, v, _, _ in got) == list(range(n))
    by_key: dict = {}
    for k, v, p, _ in got:                            # each partition in offset order
        by_key.setdefault(k, []).append((int(v), p))
    for k, rows in by_key.items():
        for q in {p for _, p in rows}:
            values = [v for v, p in rows if p == q]
            assert values == sorted(values), (k, q)   # a key's rows in order in each partition
        parts = [p for _, p in sorted(rows)]
        assert sum(a != b for a, b in zip(parts, parts[1:])) <= 1, (k, parts)   # moved once
        assert parts[0] in (partition_for_key(k, 2, 2), partition_for_key(k, 2, 4))
        assert parts[-1] == partition_for_key(k, 2, 4)
    assert {p for _, _, p, _ in got} == {0, 1, 2, 3}


def test_what_is_queued_is_sent_while_the_next_rows_are_computed(kafka):
    """The rows' iterator blocks (Spark computing the next batch, or a held task): the batch
    already queued reaches the broker meanwhile, not once the iterator yields again."""
    kafka.call(kafka.cluster.create_topic, "sink-early", 1, 2)
    seen_meanwhile = []

    def high_watermark() -> int:
        async def go():
            async with Admin(kafka.bootstrap) as a:
                got = await a.list_offsets({TopicPartition("sink-early", 0): "latest"})
                out.append(got[TopicPartition("sink-early", 0)][0])
        out: list = []
        th = threading.Thread(target=lambda: asyncio.run(go()))     # see _create_partitions
        th.start()
        th.join(30)
        return out[0]

    def batches():
        yield pa.RecordBatch.from_arrays([pa.array([b"%d" % i for i in range(500)])],
                                         names=["value"])
        deadline = time.monotonic() + 30
        while high_watermark() < 500 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen_meanwhile.append(high_watermark())
        yield pa.RecordBatch.from_arrays([pa.array([b"%d" % i for i in range(500, 600)])],
                                         names=["value"])

    opts = parse_sink({"kafka.bootstrap.servers": kafka.bootstrap, "topic": "sink-early"})
    assert asyncio.run(_write(opts, batches())).records == 600
    assert seen_meanwhile == [500]
