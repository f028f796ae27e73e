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

# Partition errors that a metadata refresh (a moved leader, a removed partition) may cure.
REFRESH_ERRORS = {Errors.NotLeaderForPartitionError.errno, Errors.FencedLeaderEpochError.errno,
                  Errors.UnknownTopicOrPartitionError.errno, Errors.LeaderNotAvailableError.errno,
                  Errors.UnknownLeaderEpochError.errno, Errors.KafkaStorageError.errno,
                  Errors.OffsetNotAvailableError.errno}


async def list_offsets(pool: ConnectionPool, metadata: ClusterMetadata,
                       specs: dict[TopicPartition, int], isolation_level: int = 0,
                       timeout: float = 30.0) -> dict[TopicPartition, tuple[int, int]]:
    """{tp: timestamp spec (-2 earliest, -1 latest, ...)} -> {tp: (offset, timestamp)}, from leaders.

    Retries partitions whose leader moved until `timeout`; raises the last error then.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    out: dict[TopicPartition, tuple[int, int]] = {}
    todo = dict(specs)
    while todo:
        for t in {tp.topic for tp in todo}:
            if metadata.topic(t) is None:
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
                    else:
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
