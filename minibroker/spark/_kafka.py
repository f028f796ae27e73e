"""Synchronous Kafka calls for the connector, on the reference client's connection and metadata.

Every function opens its own connections (asyncio.run) and closes them: the methods of a Python
data source run in short-lived or freshly unpickled processes that share nothing with the driver.

`fetch_range` is the read path: Fetch requests from the partition's leader from `start` until
`end`, each response's record batches decoded into columns by minibroker.spark.decode (numpy and
Arrow kernels, no per-record objects), grouped into lists of about `rows_per_batch` records.
"""
from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass

import kafka.errors as Errors
from kafka.protocol.consumer import FetchResponse

from minibroker.client import Admin, TopicPartition
from minibroker.client.kip253 import epoch_end_offset, kip253_counts, partition_leader_epochs
from minibroker.client.list_offsets import list_offsets
from minibroker.protocol.errors import INVALID_PARTITION_METADATA
from minibroker.protocol.messages import FetchRequestKip253
from minibroker.spark import decode
from minibroker.spark.security import ClientConf

EARLIEST, LATEST = -2, -1
_REFRESH = {Errors.NotLeaderForPartitionError.errno, Errors.FencedLeaderEpochError.errno,
            Errors.UnknownTopicOrPartitionError.errno, Errors.LeaderNotAvailableError.errno,
            Errors.UnknownLeaderEpochError.errno, Errors.KafkaStorageError.errno,
            Errors.OffsetNotAvailableError.errno, INVALID_PARTITION_METADATA}


_NULL_ID = "00000000-0000-0000-0000-000000000000"


class DataLossError(RuntimeError):
    """Records the query wanted are gone (deleted by retention or DeleteRecords)."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: tuple[int, ...]
    counts: tuple[int, int] | None       # KIP-253 (N, U) when the broker reports them
    topic_id: str | None = None          # None from brokers without topic ids


def _admin(conf: ClientConf | str) -> Admin:
    if isinstance(conf, str):
        conf = ClientConf(conf)
    return Admin(conf.bootstrap, client_id=conf.client_id, request_timeout_ms=conf.request_timeout_ms,
                 security=conf.client_security())


async def _topics(admin: Admin, subscribe: list[str] | None, pattern: str | None,
                  assign: dict[str, list[int]] | None) -> dict[str, TopicInfo]:
    resp = await admin.metadata.fetch_all()
    names = sorted(t.name for t in resp.topics if not getattr(t, "is_internal", False)
                   and not t.name.startswith("__"))
    if subscribe is not None:
        names = [n for n in subscribe if n in admin.metadata.topics]
    elif pattern is not None:
        rx = re.compile(pattern)
        names = [n for n in names if rx.fullmatch(n)]
    elif assign is not None:
        names = sorted(n for n in assign if n in admin.metadata.topics)
    out = {}
    for n in names:
        md = admin.metadata.topic(n)
        parts = sorted(md.partitions)
        if assign is not None:
            parts = sorted(p for p in assign[n] if p in md.partitions)
        tid = getattr(md, "topic_id", None)
        out[n] = TopicInfo(n, tuple(parts), kip253_counts(md),
                           str(tid) if tid and str(tid) != _NULL_ID else None)
    return out


async def _offsets(admin: Admin, specs: dict[TopicPartition, int], drop_missing: bool = False,
                   leader_epochs: dict[TopicPartition, int] | None = None
                   ) -> dict[TopicPartition, int]:
    """Offsets of `specs`; with drop_missing, partitions deleted meanwhile are left out (never
    retried until a time-out)."""
    if not specs:
        return {}
    got = await list_offsets(admin.pool, admin.metadata, specs, timeout=admin.pool.request_timeout,
                             drop_missing=drop_missing, leader_epochs=leader_epochs)
    return {tp: off for tp, (off, _) in got.items()}


def describe(bootstrap: ClientConf | str, subscribe=None, pattern=None, assign=None,
             specs_of=None) -> tuple[dict[str, TopicInfo], dict[str, dict[TopicPartition, int]]]:
    """Topics and, for each named spec (e.g. {"earliest": -2, ...} per tp), the offsets.

    `specs_of(topics) -> {name: {tp: spec}}` builds the ListOffsets specs once topics are known."""
    async def go():
        admin = _admin(bootstrap)
        try:
            topics = await _topics(admin, subscribe, pattern, assign)
            specs = specs_of(topics) if specs_of else {}
            offsets = {name: await _offsets(admin, s) for name, s in specs.items()}
            return topics, offsets
        finally:
            await admin.close()
    return asyncio.run(go())


# ---------------------------------------------------------------------------- KIP-253 lookups
async def leader_epoch_maps(admin: Admin, topic: str, partitions: list[int]):
    return await partition_leader_epochs(admin.pool, topic, partitions)


async def end_of_epoch(admin: Admin, topic: str, partition: int, epoch: int) -> int:
    if admin.metadata.leader_epoch(topic, partition) <= epoch:
        await admin.metadata.refresh([topic])
    return await epoch_end_offset(admin.pool, admin.metadata, topic, partition, epoch)


def probe(conf: ClientConf) -> None:
    """Connect once (Metadata): a listener that refuses these settings (TLS against a plaintext
    port, a certificate not trusted) fails here with a message saying so."""
    async def go(admin):
        try:
            await admin.metadata.fetch_all()
        except (Errors.KafkaError, OSError, asyncio.TimeoutError) as e:
            raise _unreachable(conf, e) from None
    run_with_admin(conf, go)


def _unreachable(conf: ClientConf | str, e: Exception) -> ConnectionError:
    conf = ClientConf(conf) if isinstance(conf, str) else conf
    protocol = dict(conf.security).get("kafka.security.protocol", "PLAINTEXT").upper()
    return ConnectionError(f"cannot reach {conf.bootstrap} with security.protocol={protocol}: {e}")


def run_with_admin(bootstrap: ClientConf | str, fn):
    """asyncio.run(fn(admin)) with a fresh Admin closed afterwards."""
    async def go():
        admin = _admin(bootstrap)
        try:
            return await fn(admin)
        except Errors.NodeNotReadyError as e:     # no broker reachable: say how we tried
            raise _unreachable(bootstrap, e) from None
        finally:
            await admin.close()
    return asyncio.run(go())


# ---------------------------------------------------------------------------- fetching
async def _fetch(admin: Admin, topic: str, partition: int, start: int, end: int,
                 fail_on_data_loss: bool, with_headers: bool, max_bytes: int,
                 rows_per_batch: int, emit) -> None:
    md = admin.metadata
    await md.refresh([topic])
    offset = start
    chunks: list[decode.Decoded] = []
    rows = 0
    errors = 0
    absent = _Absence()
    while offset < end:
        leader = md.leader(topic, partition)
        if leader < 0 and absent.lasted(md, topic, partition) \
                and _removed(md, topic, partition, offset, end, fail_on_data_loss):
            break
        if leader < 0:
            errors += 1
            if errors > 100:
                raise Errors.LeaderNotAvailableError(f"{topic}-{partition}")
            await asyncio.sleep(0.1)
            await md.refresh([topic])
            continue
        cls = FetchRequestKip253
        req = cls(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=max_bytes,
                  isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                  rack_id="", topics=[cls.FetchTopic(
                      # -1: no KIP-253 count check (as stock clients): the range was planned
                      # from the broker's epochs already, and a shrink must not fail the read
                      topic=topic, undeleted_partition_count=-1,
                      partitions=[cls.FetchTopic.FetchPartition(
                          partition=partition, current_leader_epoch=md.leader_epoch(topic, partition),
                          fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                          partition_max_bytes=max_bytes)])])
        try:
            resp = await admin.pool.request(leader, req, lo=4, hi=12, response_class=FetchResponse)
        except (ConnectionError, asyncio.TimeoutError, OSError, Errors.KafkaConnectionError):
            admin.pool.close_node(leader, "fetch failed")
            errors += 1
            if errors > 100:
                raise
            await asyncio.sleep(0.1)
            await md.refresh([topic])
            continue
        p = resp.responses[0].partitions[0]
        if p.error_code == Errors.OffsetOutOfRangeError.errno:
            lso = (await _offsets(admin, {TopicPartition(topic, partition): EARLIEST}))[
                TopicPartition(topic, partition)]
            if offset >= lso:
                raise Errors.OffsetOutOfRangeError(f"{topic}-{partition} offset {offset}")
            if fail_on_data_loss:
                raise DataLossError(
                    f"{topic}-{partition}: offsets {offset}..{min(lso, end) - 1} were deleted before "
                    f"they were read (failOnDataLoss=true; set it to false to skip them)")
            offset = lso
            continue
        if p.error_code == Errors.UnknownTopicOrPartitionError.errno:
            await md.refresh([topic])
            if absent.lasted(md, topic, partition) \
                    and _removed(md, topic, partition, offset, end, fail_on_data_loss):
                break
        if p.error_code:
            errors += 1
            if errors > 100 or p.error_code not in _REFRESH and not Errors.for_code(p.error_code).retriable:
                raise Errors.for_code(p.error_code)(f"fetch {topic}-{partition} at {offset}")
            await asyncio.sleep(0.1)
            await md.refresh([topic])
            continue
        errors = 0
        chunk, nxt = decode.decode_answer(p.records, offset, end, with_headers) if p.records \
            else (None, offset)
        if chunk is not None:
            chunks.append(chunk)
            rows += len(chunk)
        if nxt == offset:
            if p.high_watermark <= offset:
                # Planned past the high watermark: the log was truncated (an unclean leader
                # change) after planning; those offsets will never hold the planned records.
                if fail_on_data_loss:
                    raise DataLossError(f"{topic}-{partition}: offsets {offset}..{end - 1} planned "
                                        f"but the high watermark is now {p.high_watermark}")
                break
            errors += 1
            if errors > 100:
                raise Errors.KafkaTimeoutError(f"fetch {topic}-{partition} at {offset}: no progress")
            continue
        offset = nxt
        if rows >= rows_per_batch:
            emit(chunks)
            chunks, rows = [], 0
    if chunks:
        emit(chunks)


class _Absence:
    """Whether a partition has been missing from refreshed metadata long enough to be gone: a
    broker whose metadata lags a just-created partition answers without it (or with no leader),
    and giving up a planned range then would skip records that are there."""

    ROUNDS, SECONDS = 5, 1.0

    def __init__(self) -> None:
        self.rounds, self.since = 0, 0.0

    def lasted(self, md, topic: str, partition: int) -> bool:
        t = md.topic(topic)
        if t is not None and partition in t.partitions:
            self.rounds = 0
            return False
        now = time.monotonic()
        if self.rounds == 0:
            self.since = now
        self.rounds += 1
        return self.rounds >= self.ROUNDS and now - self.since >= self.SECONDS


def _removed(md, topic: str, partition: int, offset: int, end: int, fail_on_data_loss: bool) -> bool:
    """Whether the partition being read is gone from (refreshed) metadata: a KIP-253 partition
    is removed only once drained, so its planned rest was delivered or deliberately deleted (a
    replayed micro-batch): stop. A deleted topic's, or a removed partition of a topic without
    KIP-253 counts, is data loss."""
    t = md.topic(topic)
    if t is not None and partition in t.partitions:
        return False
    if t is not None and kip253_counts(t) is not None or not fail_on_data_loss:
        return True
    raise DataLossError(f"{topic}-{partition}: deleted with offsets {offset}..{end - 1} unread "
                        f"(failOnDataLoss=true; set it to false to skip them)")


def fetch_range(bootstrap: ClientConf | str, topic: str, partition: int, start: int, end: int, *,
                fail_on_data_loss: bool = True, with_headers: bool = False,
                max_bytes: int = 8 << 20, rows_per_batch: int = 65536) -> list[list[decode.Decoded]]:
    out: list[list[decode.Decoded]] = []

    async def go(admin):
        await _fetch(admin, topic, partition, start, end, fail_on_data_loss, with_headers,
                     max_bytes, rows_per_batch, out.append)
    run_with_admin(bootstrap, go)
    return out
