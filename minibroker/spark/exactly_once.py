"""`exactlyOnce=true`: each Spark task writes inside a Kafka transaction, with a commit marker.

The transactional id is derived from what a replay of the same work has in common with the first
attempt: the streaming query's id (kept in its checkpoint) and the micro-batch id, or the batch
write's id, and the task's partition. A task starts with InitProducerId under that id, which fences
an earlier attempt still running and aborts its open transaction; then it looks for its commit
marker (a record keyed by the transactional id in the `minibroker-spark-commits` topic, read at
read_committed): found, the earlier attempt committed, and the task writes nothing; else it writes
its rows and the marker in one transaction and commits. Readers at read_committed see each row
once, whether a task is retried, a micro-batch replayed after a driver restart, or both.

The limits: a replayed micro-batch must hand each task the same rows (deterministic input per
micro-batch: the source's offsets are in the checkpoint, but a non-deterministic transformation,
or a repartition without a stable order, defeats it); read_uncommitted readers see aborted
attempts; the marker topic keeps one record per task and micro-batch (compacted, so it does not
grow with retries, but it grows with the query's age, and a task's lookup reads its partition).
"""
from __future__ import annotations

import asyncio
import json

import kafka.errors as Errors
from pyspark import TaskContext

from minibroker.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from minibroker.client.list_offsets import LATEST, list_offsets
from minibroker.partitioning import murmur2

MARKERS = "minibroker-spark-commits"
MARKER_PARTITIONS = 8
_LOOKUP_TIMEOUT_S = 60.0


def transactional_id(write_id: str, partition: int) -> str:
    return f"minibroker-spark-{write_id}-{partition}"


def task_write_id(batch_write_id: str | None) -> str:
    """This task's write: `query id/micro-batch id` in a streaming query (Spark's local
    properties, the same after a restart), else the batch write's id made on the driver."""
    tc = TaskContext.get()
    query = tc.getLocalProperty("sql.streaming.queryId") if tc else None
    batch = tc.getLocalProperty("streaming.sql.batchId") if tc else None
    if query and batch is not None:
        return f"{query}-{batch}"
    if batch_write_id is None:
        raise RuntimeError("exactlyOnce: no micro-batch id and no write id for this task")
    return batch_write_id


def task_partition() -> int:
    tc = TaskContext.get()
    return tc.partitionId() if tc else 0


def marker_partition(txn_id: str) -> int:
    return (murmur2(txn_id.encode()) & 0x7FFFFFFF) % MARKER_PARTITIONS


async def ensure_marker_topic(admin: Admin) -> None:
    """Create the compacted marker topic if missing (on the driver, once per write)."""
    await admin.metadata.fetch_all()
    if admin.metadata.topic(MARKERS) is not None:
        return
    brokers = max(1, len(admin.metadata.brokers))
    try:
        await admin.create_topics([NewTopic(MARKERS, MARKER_PARTITIONS, min(3, brokers),
                                            {"cleanup.policy": "compact"})])
    except Errors.TopicAlreadyExistsError:
        pass


async def committed(producer: Producer, opts, txn_id: str) -> dict | None:
    """The marker of `txn_id` at read_committed (its value), or None."""
    tp = TopicPartition(MARKERS, marker_partition(txn_id))
    got = await list_offsets(producer.pool, producer.metadata, {tp: LATEST}, isolation_level=1,
                             timeout=_LOOKUP_TIMEOUT_S)
    end = got[tp][0]
    if end <= 0:
        return None
    consumer = Consumer(opts.bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                        auto_offset_reset="earliest", client_id=opts.client.client_id,
                        request_timeout_ms=opts.client.request_timeout_ms,
                        security=opts.client.client_security(), ordering_barrier=False)
    found = None
    key = txn_id.encode()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _LOOKUP_TIMEOUT_S
        while True:
            for rec in await consumer.poll(0.5):
                if rec.key == key:
                    found = json.loads(rec.value) if rec.value else {}
            if found is not None or await consumer.position(tp) >= end:
                break
            # The position stops before trailing control records (the commit markers): what
            # was fetched, all taken, counts too.
            st = consumer._state(tp)
            if not st.buffer and not st.inflight and (st.fetch_offset or 0) >= end:
                break
            if loop.time() > deadline:
                raise Errors.KafkaTimeoutError(f"exactlyOnce: reading {tp} to {end} timed out")
    finally:
        await consumer.close()
    return found


def marker_value(records: int, partitions: dict) -> bytes:
    return json.dumps({"records": records,
                       "partitions": {f"{t}-{p}": n for (t, p), n in sorted(partitions.items())}},
                      sort_keys=True).encode()
