"""Log maintenance in the background: retention (time and size), compaction of compacted logs
(log/cleaner.py) and, with a data dir, high-watermark checkpoints. Part of ReplicaManager
(broker/replica_state.py says how the parts fit)."""
from __future__ import annotations

import logging

from minibroker.broker.replica_state import ReplicaState
from minibroker.log import cleaner

log = logging.getLogger("minibroker.replica")


class LogMaintenance(ReplicaState):

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await self.clock.sleep(interval)
            self.apply_retention()

    async def _checkpoint_loop(self) -> None:
        interval = self.config.replica_high_watermark_checkpoint_interval_ms / 1000
        log_manager = self.log_manager
        assert log_manager is not None, "started with a log manager only"
        while True:
            await self.clock.sleep(interval)
            log_manager.checkpoint()

    async def _cleaner_loop(self) -> None:
        interval = max(self.config.log_cleaner_backoff_ms, 1) / 1000
        while True:
            await self.clock.sleep(interval)
            self.clean_logs()

    def clean_logs(self) -> int:
        """Compact every hosted compacted log that needs it (log/cleaner.py), leader or follower,
        below its high watermark. Returns how many were cleaned."""
        now = self.clock.now_ms()
        cleaned = 0
        for key in sorted(self.partitions):
            p = self.partitions[key]
            if p.log.config.compacts and cleaner.needs_cleaning(p.log, now, p.high_watermark):
                try:
                    result = cleaner.clean(p.log, now, p.high_watermark)
                except Exception:  # noqa: BLE001 — one bad log must not stop the others
                    log.exception("broker %d: cleaning %s-%d failed", self.node_id, *key)
                    continue
                cleaned += 1
                log.debug("broker %d: cleaned %s-%d: %s", self.node_id, key[0], key[1], result)
        return cleaned

    def apply_retention(self) -> None:
        now = self.clock.now_ms()
        for key in sorted(self.partitions):
            p = self.partitions[key]
            if p.is_leader and p.log.apply_retention(now, p.high_watermark):
                p.notify_data()
