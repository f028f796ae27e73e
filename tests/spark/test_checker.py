"""The ordering checker finds exactly the injected losses, duplicates and swaps, in pandas and as a
Spark job (the 5M/20M-row timings are in benchmarks/ordering_checker.py)."""
from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas", reason="the spark extra is not installed: pip install -e '.[test,fast,spark]'")

from minibroker.spark.checker import check_pandas, check_spark, generate_history

pytestmark = pytest.mark.timeout(600)


def test_pandas_finds_exactly_the_injected_faults():
    p, d = generate_history(300_000, keys=997, losses=17, duplicates=23, swaps=31, seed=7)
    r = check_pandas(p, d)
    assert (r.records, r.keys, r.losses, r.duplicates, r.violations, r.unacked) == \
        (300_000, 997, 17, 23, 31, 0)
    assert r.delivered == 300_000 - 17 + 23


def test_hand_made_history():
    produced = pd.DataFrame({"key": [b"a", b"a", b"a", b"b"], "seq": [0, 1, 2, 0]})
    delivered = pd.DataFrame({"key": [b"a", b"a", b"b", b"a", b"c"], "seq": [1, 0, 0, 1, 5],
                              "order": [0, 1, 2, 3, 4]})
    r = check_pandas(produced, delivered)
    # a/1 before a/0: one violation; a/1 twice: one duplicate; a/2 never: a loss; c/5 unacked
    assert (r.violations, r.duplicates, r.losses, r.unacked) == (1, 1, 1, 1)
    assert r.examples and "seq 1" in r.examples[0]


def test_spark_and_pandas_agree(spark):
    p, d = generate_history(50_000, keys=101, losses=5, duplicates=9, swaps=13, seed=3)
    r = check_pandas(p, d)
    rs = check_spark(spark.createDataFrame(p), spark.createDataFrame(d))
    assert rs.counts() == r.counts()
    assert (rs.losses, rs.duplicates, rs.violations) == (5, 9, 13)
