"""Record generation and read-back checks shared by the conformance tests."""
from __future__ import annotations

import random
import time
from collections import defaultdict

N_KEYS = 30
SEP = b"|"


def make_records(n: int, seed: int, n_keys: int = N_KEYS, max_extra: int = 200):
    """``n`` keyed records: key ``k<j>``, value ``key|<seq:06d>|<random bytes>`` (seeded)."""
    rng = random.Random(seed)
    out = []
    for seq in range(n):
        key = b"k%d" % rng.randrange(n_keys)
        value = key + SEP + b"%06d" % seq + SEP + rng.randbytes(rng.randrange(max_extra + 1))
        out.append((key, value))
    return out


def seq_of(value: bytes) -> int:
    return int(value.split(SEP, 2)[1])


def check_readback(records, produced, consumed, partitions: int) -> None:
    """Everything produced is read back exactly once, per-key ordered, byte-exact.

    ``records``: [(key, value)] in send order; ``produced``: [(partition, offset)] for each record
    as the producer reported it, or None; ``consumed``: [(partition, offset, key, value)].
    """
    positions = [(p, o) for p, o, _, _ in consumed]
    assert len(set(positions)) == len(positions), "a (partition, offset) was delivered twice"
    assert len(consumed) == len(records), f"read {len(consumed)} records, produced {len(records)}"
    assert sorted((k, v) for _, _, k, v in consumed) == sorted(records), "payload bytes differ"

    by_partition = defaultdict(list)
    key_partitions = defaultdict(set)
    for p, o, k, v in consumed:
        assert 0 <= p < partitions, f"record in partition {p}"
        by_partition[p].append((o, k, v))
        key_partitions[k].add(p)
    bad = {k: ps for k, ps in key_partitions.items() if len(ps) != 1}
    assert not bad, f"keys spread over several partitions: {bad}"

    for p, recs in by_partition.items():
        recs.sort()
        offsets = [o for o, _, _ in recs]
        assert offsets == list(range(len(recs))), f"partition {p} offsets not 0..n-1: {offsets[:20]}"
        last_seq: dict[bytes, int] = {}
        for o, k, v in recs:
            s = seq_of(v)
            assert s > last_seq.get(k, -1), f"key {k!r} out of order at partition {p} offset {o}"
            last_seq[k] = s

    if produced is not None:
        assert len(produced) == len(records)
        at = {(p, o): (k, v) for p, o, k, v in consumed}
        for (k, v), (p, o) in zip(records, produced):
            assert at.get((p, o)) == (k, v), f"acknowledged ({p}, {o}) does not hold {k!r}"


def expected_offsets(consumed, partitions: int) -> dict[int, tuple[int, int]]:
    counts = defaultdict(int)
    for p, _, _, _ in consumed:
        counts[p] += 1
    return {p: (0, counts[p]) for p in range(partitions)}


def poll_values(consumer, seconds: float, until: int | None = None) -> list[bytes]:
    """Values a confluent-kafka ``consumer`` polls in ``seconds`` (stopping once it has ``until``
    of them, when given); error events are skipped."""
    got: list[bytes] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end and (until is None or len(got) < until):
        m = consumer.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value())
    return got
