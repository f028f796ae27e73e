"""ISR changes: shrinking out followers that fell behind (replica.lag.time.max.ms), expanding
(a follower's fetch asks, broker/partition.py), each sent to the controller as AlterPartition and
applied when it accepts. Part of ReplicaManager (broker/replica_state.py says how the parts fit)."""
from __future__ import annotations

import asyncio
import logging

from minibroker.broker.partition import Partition
from minibroker.broker.replica_state import ReplicaState

log = logging.getLogger("minibroker.replica")


class IsrManager(ReplicaState):

    # ------------------------------------------------------------------ ISR
    def request_isr_change(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        if p.isr_change_in_flight or not self.running:
            return
        p.isr_change_in_flight = True
        p.pending_isr = tuple(new_isr)
        task = asyncio.get_running_loop().create_task(self._alter_partition(p, new_isr))
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)

    async def _alter_partition(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        before = p.isr
        try:
            code = await self.controller.alter_partition(
                self.node_id, p.topic, p.partition, p.leader_epoch, p.partition_epoch, new_isr)
            if code == 0:
                self._isr_changed(p, before, new_isr)
        except Exception:  # noqa: BLE001 — the next check retries
            log.exception("broker %d: AlterPartition %s-%d failed", self.node_id, p.topic,
                          p.partition)
        finally:
            p.isr_change_in_flight = False
            if p.pending_isr:
                # The high watermark waited for the replicas it would add (maximal ISR): without
                # them it may move now, and a follower's idle fetch no longer recomputes it.
                p.pending_isr = ()
                p.maybe_increment_high_watermark()

    def _isr_changed(self, p: Partition, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """Kafka's IsrShrinksPerSec / IsrExpandsPerSec and its INFO line for each change."""
        if tuple(after) == tuple(before):
            return
        if len(after) < len(before):
            self.stats.isr_shrinks += 1
            what = "Shrinking"
        else:
            self.stats.isr_expands += 1
            what = "Expanding"
        log.info("broker %d: [Partition %s-%d] %s ISR from %s to %s", self.node_id, p.topic,
                 p.partition, what, ",".join(map(str, before)), ",".join(map(str, after)))

    async def _isr_shrink_loop(self) -> None:
        lag_ms = self.config.replica_lag_time_max_ms
        while True:
            await self.clock.sleep(lag_ms / 2000)
            now = self.clock.now_ms()
            for key in sorted(self.partitions):
                p = self.partitions[key]
                if p.is_leader and not p.isr_change_in_flight:
                    out = p.out_of_sync_replicas(now, lag_ms)
                    if out:
                        self.request_isr_change(p, tuple(r for r in p.isr if r not in out))
