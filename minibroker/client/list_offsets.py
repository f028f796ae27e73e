"""ListOffsets from partition leaders, shared by the consumer (position resets, KIP-253 barrier
lookups), the producer (KIP-253 tombstone checks) and the admin client.

EARLIEST / LATEST are ListOffsets' timestamp specs (-2 / -1).
"""
from __future__ import annotations

import asyncio
import collections

import kafka.errors as Errors
from kafka.protocol.consumer import ListOffsetsRequest

from minibroker.client.connection_pool import ConnectionPool
from minibroker.client.metadata import ClusterMetadata
from minibroker.client.records import TopicPartition

EARLIEST, LATEST = -2, -1
MISSING_ROUNDS = 5
MISSING_SECONDS = 1.0

# Partition errors that a metadata refresh (a moved leader, a removed partition) may cure.
REFRESH_ERRORS = {Errors.NotLeaderForPartitionError.errno, Errors.FencedLeaderEpochError.errno,
                  Errors.UnknownTopicOrPartitionError.errno, Errors.LeaderNotAvailableError.errno,
                  Errors.UnknownLeaderEpochError.errno, Errors.KafkaStorageError.errno,
                  Errors.OffsetNotAvailableError.errno}


async def list_offsets(pool: ConnectionPool, metadata: ClusterMetadata,
                       specs: dict[TopicPartition, int], isolation_level: int = 0,
                       timeout: float = 30.0, drop_missing: bool = False,
                       leader_epochs: dict[TopicPartition, int] | None = None
                       ) -> dict[TopicPartition, tuple[int, int]]:
    """{tp: timestamp spec (-2 earliest, -1 latest, ...)} -> {tp: (offset, timestamp)}, from leaders.

    Retries partitions whose leader moved until `timeout`; raises the last error then.
    drop_missing: a partition (or topic) the refreshed metadata no longer has was deleted (KIP-253
    removal, topic deletion): it is left out of the answer instead of retried until the timeout;
    so is one whose leader still answers UNKNOWN_TOPIC_OR_PARTITION (or that has none) after
    MISSING_ROUNDS refreshes (a metadata answer that lags the deletion, or a partition not yet
    on its leader): the caller asks again later. Absent only counts once it has lasted
    MISSING_SECONDS over refreshes: a broker whose metadata lags a just-created partition answers
    without it, and a caller that planned reading it would otherwise skip its first records.
    leader_epochs, when given, receives each answer's leader epoch (-1 from brokers without it).
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    out: dict[TopicPartition, tuple[int, int]] = {}
    todo = dict(specs)
    missing: collections.Counter = collections.Counter()    # rounds a partition looked missing
    since: dict[TopicPartition, float] = {}                # when it first did
    while todo:
        if drop_missing:
            _drop_missing(metadata, todo, missing, since, loop.time())
            if not todo:
                break
        for t in {tp.topic for tp in todo}:
            if metadata.topic(t) is None and not drop_missing:
                await metadata.wait_for_topic(t, timeout=max(0.1, end - loop.time()))
        by_node: dict[int, list[TopicPartition]] = collections.defaultdict(list)
        for tp in todo:
            by_node[metadata.leader(tp.topic, tp.partition)].append(tp)
        last_err: Exception | None = None

        async def one(node: int, tps: list[TopicPartition]) -> None:
            nonlocal last_err
            if node < 0:
                return
            topics: dict[str, list] = collections.defaultdict(list)
            for tp in tps:
                topics[tp.topic].append(ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=-1, timestamp=todo[tp],
                    max_num_offsets=1))
            req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=n, partitions=ps)
                for n, ps in topics.items()], timeout_ms=int(timeout * 1000))
            try:
                resp = await pool.request(node, req, lo=1)
            except Exception as e:  # noqa: BLE001
                last_err = e
                pool.close_node(node, "list offsets failed")
                return
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == 0:
                        out[tp] = (p.offset, p.timestamp)
                        todo.pop(tp, None)
                        if leader_epochs is not None:
                            leader_epochs[tp] = getattr(p, "leader_epoch", -1)
                    else:
                        if p.error_code == Errors.UnknownTopicOrPartitionError.errno:
                            missing[tp] += 1
                        err = Errors.for_code(p.error_code)
                        last_err = err(f"ListOffsets {tp}")
                        if not err.retriable and p.error_code not in REFRESH_ERRORS:
                            raise last_err

        await asyncio.gather(*(one(n, tps) for n, tps in by_node.items()))
        if todo:
            if loop.time() > end:
                raise last_err or Errors.KafkaTimeoutError(f"ListOffsets for {sorted(todo)}")
            await metadata.refresh({tp.topic for tp in todo})
            await asyncio.sleep(0.05)
    return out


def _drop_missing(metadata: ClusterMetadata, todo: dict, missing: collections.Counter,
                  since: dict, now: float) -> None:
    """Leave out of `todo` the partitions missing (no metadata, no leader, or answered unknown)
    for MISSING_ROUNDS rounds over at least MISSING_SECONDS."""
    for tp in sorted(todo):
        md = metadata.topic(tp.topic)
        if md is None or tp.partition not in md.partitions \
                or metadata.leader(tp.topic, tp.partition) < 0:
            missing[tp] += 1
        if missing[tp]:
            since.setdefault(tp, now)
        if missing[tp] >= MISSING_ROUNDS and now - since[tp] >= MISSING_SECONDS:
            del todo[tp]
