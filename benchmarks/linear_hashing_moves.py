"""How many keys change partition when a topic grows: KIP-253 linear hashing vs Kafka's modulo.

For U = 4..64, over 100,000 deterministic keys b"key-0" .. b"key-99999", the fraction of keys whose
partition changes for U -> U+1 and U -> 2U:
- LH N=U : linear hashing, topic created with U partitions (initial_partition_count = U);
- LH N=1 : linear hashing, topic created with 1 partition and grown to U;
- mod    : Kafka's default partitioner, murmur2(key) & 0x7fffffff % U.
"between" counts keys that move from one partition to another partition that existed before:
the moves that block consumers on each other.  Linear hashing never has any.

Run: python benchmarks/linear_hashing_moves.py   (also writes benchmarks/results/linear_hashing_moves.txt)
numpy only vectorises minibroker.partitioning's formula; every column is cross-checked
against partition_for_hash on the first 2,000 keys.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

from _results import publish    # benchmarks/, the folder of the script
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from minibroker.partitioning import key_hash, partition_for_hash  # noqa: E402

KEYS = 100_000
CHECK = 2_000


def linear(h: np.ndarray, n: int, u: int) -> np.ndarray:
    base = n << ((u // n).bit_length() - 1)
    p = h % base
    out = np.where(p < u - base, h % (base << 1), p)
    assert all(int(out[i]) == partition_for_hash(int(h[i]), n, u) for i in range(CHECK))
    return out


def modulo(h: np.ndarray, _n: int, u: int) -> np.ndarray:
    return h % u


def moved(f, h: np.ndarray, n: int, u_from: int, u_to: int) -> tuple[float, float]:
    before, after = f(h, n, u_from), f(h, n, u_to)
    changed = before != after
    between = changed & (after < u_from)
    return changed.mean(), between.mean()


def main() -> list[str]:
    h = np.fromiter((key_hash(b"key-%d" % i) for i in range(KEYS)), dtype=np.int64, count=KEYS)
    cols = ["LH N=U +1", "LH N=U x2", "LH N=1 +1", "LH N=1 x2", "mod +1", "mod x2", "mod +1 between"]
    lines = [
        f"Fraction of {KEYS:,} keys (b'key-%d') that change partition when a topic grows from U.",
        "+1: U -> U+1.  x2: U -> 2U.  'between': moved to a partition that already existed.",
        "Linear hashing's 'between' is 0 for every row (asserted).",
        "",
        f"{'U':>3} " + " ".join(f"{c:>14}" for c in cols),
    ]
    totals = np.zeros(len(cols))
    for u in range(4, 65):
        row = []
        for f, n in ((linear, u), (linear, 1)):
            for u_to in (u + 1, 2 * u):
                frac, between = moved(f, h, n, u, u_to)
                assert between == 0.0, (n, u, u_to)
                row.append(frac)
        frac1, between1 = moved(modulo, h, u, u, u + 1)
        frac2, _ = moved(modulo, h, u, u, 2 * u)
        row += [frac1, frac2, between1]
        totals += row
        lines.append(f"{u:>3} " + " ".join(f"{v:>14.4f}" for v in row))
    lines.append("avg " + " ".join(f"{v:>14.4f}" for v in totals / (64 - 4 + 1)))
    lines += [
        "",
        "Expected: LH N=U +1 ~ 1/(2U) (half of partition 0 moves to U); LH x2 and mod x2 ~ 1/2;",
        "mod x2 equals LH N=U x2 (doubling is where modulo already splits p into p and p+U);",
        "mod +1 ~ U/(U+1), nearly all of it between existing partitions; LH N=1 +1 moves half of",
        "one unsplit partition: 1/2^(k+1) for every U in [2^k, 2^(k+1)), 1/(2U) only at U = 2^k.",
    ]
    return lines


if __name__ == "__main__":
    publish("linear_hashing_moves.txt", main())
