"""UpdateMetadata brings topic configs to the logs of the topics it names, and only those.

Rebuilding every hosted partition's LogConfig on each UpdateMetadata made creating T topics cost
O(T x partitions): the controller commits and propagates each created topic on its own
(benchmarks/scale.py: 1,000 topics x 10 partitions took 36 s, 2,000 took 112 s).
"""
from __future__ import annotations

from minibroker.cluster import Cluster
from minibroker.config import ClusterConfig
from minibroker.log.config import LogConfig


async def test_update_metadata_rebuilds_configs_of_the_named_topics_only(monkeypatch):
    async with Cluster(ClusterConfig(brokers=1)) as c:
        for i in range(20):
            await c.create_topic(f"t{i}", 5, 1)
        built: list[dict] = []
        real = LogConfig.from_configs.__func__

        def counting(cls, configs, **kw):
            built.append(dict(configs))
            return real(cls, configs, **kw)

        monkeypatch.setattr(LogConfig, "from_configs", classmethod(counting))
        ctl = await c.active_controller()
        res = await ctl.alter_topic_configs("t3", {"retention.ms": "7000"}, False, False)
        assert res.error_code == 0
        rm = c.brokers[1].replica_manager
        assert [rm.get("t3", p).log.config.retention_ms for p in range(5)] == [7000] * 5
        assert rm.get("t4", 0).log.config.retention_ms == LogConfig().retention_ms
        # LeaderAndIsr: one per partition of t3; UpdateMetadata: one for t3 (was one for each of
        # the 100 partitions the broker hosts)
        assert len(built) <= 5 + 1
        assert all(b == {"retention.ms": "7000"} for b in built)

        built.clear()
        await c.create_topic("u", 2, 1, {"segment.bytes": "4096"})
        assert [rm.get("u", p).log.config.segment_bytes for p in range(2)] == [4096] * 2
        assert len(built) <= 2 * 2 + 1
        assert all(b == {"segment.bytes": "4096"} for b in built)
