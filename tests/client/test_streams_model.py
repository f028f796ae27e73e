"""minibroker.client.streams without a cluster: the topology's intended widths, the shipped static
partitioner, the autoscaler's verdicts, the metrics registry."""
from __future__ import annotations

from minibroker.client.streams import (LinearHashingPartitioner, Metrics, StaticStreamPartitioner,
                                       StreamsBuilder)
from minibroker.client.streams.autoscaler import check
from minibroker.partitioning import partition_for_key


def _topology():
    b = StreamsBuilder()
    (b.stream("in").map(lambda k, v: (k, v)).repartition("r")
      .aggregate("s", lambda: b"", lambda k, v, a: v).to("out"))
    return b.build("app")


def test_subtopologies_internal_topics_and_intended_widths():
    t = _topology()
    assert [st.sources for st in t.subtopologies] == [["in"], ["app-r-repartition"]]
    assert t.internal_topics == ["app-r-repartition", "app-s-changelog"]
    assert t.external_sources == ["in"]
    assert t.subtopologies[1].changelog == "app-s-changelog"
    assert t.intended_counts({"in": 6}) == ({"app-r-repartition": 6, "app-s-changelog": 6},
                                            {0: 6, 1: 6})
    assert t.subtopology_of_internal("app-s-changelog") == 1


def test_check_finds_missing_narrow_and_wide_internal_topics():
    t = _topology()
    assert check(t, {"in": None}) is None
    c = check(t, {"in": 8, "app-r-repartition": 4})
    assert c.under == {"app-r-repartition": (4, 8)} and c.missing == ["app-s-changelog"]
    c = check(t, {"in": 4, "app-r-repartition": 4, "app-s-changelog": 8})
    assert c.over == {"app-s-changelog": (8, 4)} and not c.under


def test_linear_hashing_is_a_static_partitioner_keys_stay_or_split_to_a_new_partition():
    p = LinearHashingPartitioner(initial_count_of=lambda topic: 4)
    assert isinstance(p, StaticStreamPartitioner)
    keys = [b"key-%d" % i for i in range(500)]
    for k in keys:
        before, after = p.static_partition("t", k, 4), p.static_partition("t", k, 8)
        assert before == partition_for_key(k, 4, 4)
        assert after in (before, before + 4)       # stays, or moves to the partition split off
    moved = sum(p.static_partition("t", k, 4) != p.static_partition("t", k, 8) for k in keys)
    assert 150 < moved < 350
    called = []
    LinearHashingPartitioner(on_expansion=lambda o, n: called.append((o, n))) \
        .on_partition_expansion(4, 8)
    assert called == [(4, 8)]


def test_metrics_registry_by_name_and_tags():
    m = Metrics()
    m.set(Metrics.name("current-subtopology-parallelism", "stream-subtopology-metrics",
                       subtopology_id=0, client_id="c"), 4)
    m.add(Metrics.name("num-autoscaling-failures", "stream-client-metrics", client_id="c"))
    assert m.value("current-subtopology-parallelism", subtopology_id=0) == 4
    assert m.value("current-subtopology-parallelism", subtopology_id=1) is None
    assert m.value("num-autoscaling-failures", "stream-client-metrics", client_id="c") == 1
