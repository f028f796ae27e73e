"""The controller's INFO lines: what a commit changed, one line per topic and kind of change.

Diffed from the images before and after a commit (topics whose image object did not change are
skipped), so every path that changes metadata is covered: topics created and deleted, partition
counts, configs, leaders (elections, failover, reassignment) and replica sets.
"""
from __future__ import annotations

import logging

from minibroker.controller.image import MetadataImage, TopicImage

log = logging.getLogger("minibroker.controller")


def log_changes(old: MetadataImage, new: MetadataImage) -> None:
    if not log.isEnabledFor(logging.INFO) or old.topics is new.topics:
        return
    for name in sorted(new.topics.keys() - old.topics.keys()):
        t = new.topics[name]
        rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 0
        log.info("controller: created topic %s with %d partitions, replication factor %d%s",
                 name, len(t.partitions), rf, f", configs {dict(t.configs)}" if t.configs else "")
    for name in sorted(old.topics.keys() - new.topics.keys()):
        log.info("controller: deleted topic %s", name)
    for name in sorted(old.topics.keys() & new.topics.keys()):
        before, after = old.topics[name], new.topics[name]
        if before is not after:
            _topic_changes(name, before, after)


def _topic_changes(name: str, before: TopicImage, after: TopicImage) -> None:
    added = sorted(after.partitions.keys() - before.partitions.keys())
    removed = sorted(before.partitions.keys() - after.partitions.keys())
    if added or removed:
        log.info("controller: topic %s now has %d partitions (added %s, removed %s)", name,
                 len(after.partitions), added or "none", removed or "none")
    if before.undeleted_partition_count != after.undeleted_partition_count:
        log.info("controller: topic %s: undeleted partition count %d -> %d (KIP-253)", name,
                 before.undeleted_partition_count, after.undeleted_partition_count)
    if before.configs != after.configs:
        log.info("controller: topic %s configs now %s", name, dict(sorted(after.configs.items())))
    leaders, replicas = [], []
    for pid in sorted(before.partitions.keys() & after.partitions.keys()):
        b, a = before.partitions[pid], after.partitions[pid]
        if b is a:
            continue
        if b.leader != a.leader:
            leaders.append(f"{pid}: {b.leader} -> {a.leader} (epoch {a.leader_epoch})")
        if b.replicas != a.replicas:
            replicas.append(f"{pid}: {list(b.replicas)} -> {list(a.replicas)}")
    if leaders:
        log.info("controller: new leaders of %s: %s", name, ", ".join(leaders))
    if replicas:
        log.info("controller: new replicas of %s: %s", name, ", ".join(replicas))
