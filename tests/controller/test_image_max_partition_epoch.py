"""The image's max_partition_epoch (KIP-253, sent with every UpdateMetadata) is kept by each delta
instead of rescanned per send: it must equal a full scan after creations, leader moves, KIP-253
expansion, marking and removal, and topic deletion (when the highest epoch leaves the image)."""
from __future__ import annotations

import asyncio

from minibroker.cluster import Cluster


async def test_max_partition_epoch_equals_a_full_scan_after_every_change():
    async with Cluster(brokers=3, partition_deletion_check_interval_ms=50) as c:
        ctl = c.controller
        seen = []

        def check():
            image = c.controller.image
            assert image.max_partition_epoch == image.compute_max_partition_epoch()
            seen.append(image.max_partition_epoch)

        check()
        await c.create_topic("a", 2, 3)
        check()
        await c.create_topic("b", 1, 3)
        for _ in range(3):                              # "b" gets the highest epochs
            leader = await c.leader_of("b", 0)
            await c.move_leader("b", 0, next(r for r in (1, 2, 3) if r != leader))
            check()
        assert (await ctl.create_partitions("a", 4, None, False)).error_code == 0
        check()
        assert (await ctl.create_partitions("a", 2, None, False)).error_code == 0
        check()
        for _ in range(500):                            # the drained partitions are removed
            if len(c.controller.image.topics["a"].partitions) == 2:
                break
            await asyncio.sleep(0.01)
        check()
        high = c.controller.image.max_partition_epoch
        await c.controller.delete_topics(["b"])
        check()
        assert c.controller.image.max_partition_epoch < high    # the highest left with "b"
        assert seen == sorted(seen[:-1]) + [seen[-1]]
