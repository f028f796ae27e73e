"""`minibroker topics --list/--describe`: Kafka's TopicCommand output.

    Topic: t\tTopicId: ...\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: retention.ms=60000
    \tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: N/A\tLastKnownElr: N/A

`Configs:` lists every config whose source is not the default (Kafka's ConfigEntry.isDefault).
KIP-253: PartitionCount is the undeleted count, and partitions marked for deletion are listed
with Kafka's `MarkedForDeletion: true`.
"""
from __future__ import annotations

import re

from minibroker.cli.common import fail
from minibroker.client.admin import TOPIC, Admin

_DEFAULT_CONFIG = 5         # DescribeConfigs ConfigSource DEFAULT_CONFIG


async def matching_topics(admin: Admin, pattern: str | None, exclude_internal: bool) -> list[str]:
    """Topic names, sorted; `pattern` matched whole as a regular expression (Kafka's --topic)."""
    resp = await admin.metadata.fetch_all()
    names = sorted(t.name for t in resp.topics
                   if not t.error_code and not (exclude_internal and t.is_internal))
    if pattern is None:
        return names
    rx = re.compile(pattern)
    return [n for n in names if rx.fullmatch(n)]


async def describe(admin: Admin, args) -> None:
    resp = await admin.metadata.fetch_all()
    topics = {t.name: t for t in resp.topics if not t.error_code}
    if args.topic_id:
        names = [n for n, t in topics.items() if str(t.topic_id) == args.topic_id]
        if not names and not args.if_exists:
            fail(f"TopicId '{args.topic_id}' does not exist as expected")
    else:
        names = await matching_topics(admin, args.topic, args.exclude_internal)
        if args.topic and not names and not args.if_exists:
            fail(f"Topic '{args.topic}' does not exist as expected")
    live = {b.node_id for b in resp.brokers}
    configs = await admin.describe_config_entries([(TOPIC, n) for n in names]) if names else {}
    reports = [r for r in ("under_replicated_partitions", "under_min_isr_partitions",
                           "at_min_isr_partitions", "unavailable_partitions")
               if getattr(args, r)]
    for name in names:
        _describe_topic(topics[name], configs[(TOPIC, name)], reports, live, args)


def _describe_topic(t, entries: list, reports: list[str], live: set[int], args) -> None:
    overrides = [(c.name, c.value) for c in sorted(entries, key=lambda c: c.name)
                 if c.config_source != _DEFAULT_CONFIG]
    min_isr = int(next((c.value for c in entries if c.name == "min.insync.replicas"), 1) or 1)
    parts = sorted(t.partitions, key=lambda p: p.partition_index)
    undeleted = getattr(t, "undeleted_partition_count", -1)
    count = undeleted if 0 < undeleted <= len(parts) else len(parts)
    if not reports and parts and (not args.topics_with_overrides or overrides):
        rf = len(parts[0].replica_nodes)
        print(f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: {count}"
              f"\tReplicationFactor: {rf}"
              f"\tConfigs: {','.join(f'{k}={v}' for k, v in overrides)}")
    if args.topics_with_overrides:
        return
    for p in parts:
        isr, replicas = len(p.isr_nodes), len(p.replica_nodes)
        leader = p.leader_id if p.leader_id >= 0 else None
        wanted = {"under_replicated_partitions": isr < replicas,
                  "under_min_isr_partitions": leader is None or isr < min_isr,
                  "at_min_isr_partitions": isr == min_isr,
                  "unavailable_partitions": leader is None or leader not in live}
        if reports and not any(wanted[r] for r in reports):
            continue
        marked = "\tMarkedForDeletion: true" if p.partition_index >= count else ""
        print(f"\tTopic: {t.name}\tPartition: {p.partition_index}"
              f"\tLeader: {'none' if leader is None else leader}"
              f"\tReplicas: {','.join(map(str, p.replica_nodes))}"
              f"\tIsr: {','.join(map(str, p.isr_nodes))}\tElr: N/A\tLastKnownElr: N/A{marked}")
