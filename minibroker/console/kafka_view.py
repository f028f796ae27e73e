"""What the console reads from a cluster, as plain dicts for the templates: brokers, topics,
partitions, messages and KIP-253 partition changes.

Everything goes through the reference admin client, consumer and producer, so any Kafka cluster
answers; the minibroker-only parts (fault state, KIP-253 epochs, KIP-179 progress) are asked only
when the broker advertises minibroker's private API keys (1000-1004) in ApiVersions.
"""
from __future__ import annotations

import asyncio
import json

import kafka.errors as Errors
from kafka.protocol.admin import (DescribeLogDirsRequest, DescribeQuorumRequest,
                                  ListPartitionReassignmentsRequest)
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from minibroker.client.admin import Admin, NewTopic
from minibroker.client.kip253 import epoch_end_offset, partition_leader_epochs
from minibroker.client.producer import Producer
from minibroker.client.records import TopicPartition, decode_records
from minibroker.protocol.messages import (FaultControlRequest, FaultControlResponse,
                                          FetchRequestKip253, PrivateApiKey)

PRIVATE_KEYS = frozenset(int(k) for k in PrivateApiKey)
BROWSE_LIMIT = 200            # records on one messages page
SEARCH_SCAN = 20000           # records read at most when searching by key
FETCH_BYTES = 1 << 20         # one Fetch of the messages page
METADATA_MAX_AGE = 1.0        # s: the pages of one second share one Metadata of every topic
METADATA_STALE = 2.0          # s: served while a fresh one is fetched in the background


class ConsoleError(Exception):
    """A problem to show on the page as one line (a bad form value: HTTP 400)."""
    status = 400


class Missing(ConsoleError):
    """No such topic or group: HTTP 404."""
    status = 404


def decode(data: bytes | None, fmt: str) -> str:
    """Bytes as UTF-8 (replacing what is not), pretty JSON (else UTF-8) or hex."""
    if data is None:
        return "null"
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, sort_keys=True)
        except ValueError:
            return text
    return text


class KafkaView:
    def __init__(self, bootstrap: str, client_id: str = "minibroker-console",
                 request_timeout_ms: int = 10000) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.admin = Admin(bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms)
        self._producer: Producer | None = None
        self._producer_lock = asyncio.Lock()
        # Metadata of every topic (1,000 topics: ~100 ms to decode) is shared by the pages and
        # live refreshes of a second, the admin's own calls included; a change we make
        # drops it.
        self._fetch_all = self.admin.metadata.fetch_all
        self._all: tuple[float, object] | None = None
        self._all_lock = asyncio.Lock()
        self._refresh: asyncio.Task | None = None
        self.admin.metadata.fetch_all = self._cached_fetch_all

    async def _cached_fetch_all(self):
        """Metadata of every topic: younger than METADATA_MAX_AGE as is; up to METADATA_STALE
        old as is too, while a refresh runs in the background; older, fetched now."""
        loop = asyncio.get_running_loop()
        if self._all is not None:
            age = loop.time() - self._all[0]
            if age > METADATA_MAX_AGE and (self._refresh is None or self._refresh.done()):
                self._refresh = loop.create_task(self._refresh_all())
            if age <= METADATA_STALE:
                return self._all[1]
        return await self._refresh_all()

    async def _refresh_all(self):
        async with self._all_lock:
            now = asyncio.get_running_loop().time()
            if self._all is None or now - self._all[0] > METADATA_MAX_AGE:
                self._all = (now, await self._fetch_all())
            return self._all[1]

    def changed(self) -> None:
        self._all = None

    async def close(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
        if self._producer is not None:
            await self._producer.stop()
        await self.admin.close()

    # ------------------------------------------------------------------ cluster
    async def is_minibroker(self) -> bool:
        _, conn = await self.admin.pool.any_connection()
        return bool(PRIVATE_KEYS & set(getattr(conn, "api_versions", {})))

    async def cluster(self) -> dict:
        resp = await self.admin.metadata.fetch_all()
        desc = await self.admin.describe_cluster()
        leaders: dict[int, int] = {}
        replicas: dict[int, int] = {}
        for t in self.admin.metadata.topics.values():
            for p in t.partitions.values():
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
                for r in p.replicas:
                    replicas[r] = replicas.get(r, 0) + 1
        brokers = [dict(node_id=b, host=h, port=port, rack=rack or "",
                        controller=b == desc["controller_id"], leaders=leaders.get(b, 0),
                        replicas=replicas.get(b, 0))
                   for b, (h, port, rack) in sorted(desc["brokers"].items())]
        mini = await self.is_minibroker()
        return dict(cluster_id=desc["cluster_id"] or resp.cluster_id,
                    controller_id=desc["controller_id"], brokers=brokers,
                    racks=sorted({b["rack"] for b in brokers if b["rack"]}),
                    features=await self._features(), quorum=await self._quorum(),
                    minibroker=mini, faults=await self._faults() if mini else None,
                    topics=len(self.admin.metadata.topics))

    async def _features(self) -> list[dict]:
        """Supported and finalized features (ApiVersions v3+), [] from older brokers."""
        _, conn = await self.admin.pool.any_connection()
        if ApiVersionsRequest.API_KEY not in getattr(conn, "api_versions", {}):
            return []
        hi = min(3, conn.api_versions[ApiVersionsRequest.API_KEY][1])
        if hi < 3:
            return []
        resp = await conn.request(ApiVersionsRequest(client_software_name="minibroker-console",
                                                     client_software_version="0.1"), hi,
                                  timeout=self.admin.pool.request_timeout,
                                  response_class=ApiVersionsResponse)
        finalized = {f.name: f.max_version_level for f in (resp.finalized_features or [])}
        return [dict(name=f.name, min=f.min_version, max=f.max_version,
                     finalized=finalized.get(f.name, ""))
                for f in sorted(resp.supported_features or [], key=lambda f: f.name)]

    async def _quorum(self) -> dict | None:
        """The KRaft quorum (DescribeQuorum) where the broker answers it, else None."""
        node, conn = await self.admin.pool.any_connection()
        if DescribeQuorumRequest.API_KEY not in getattr(conn, "api_versions", {}):
            return None
        T = DescribeQuorumRequest.TopicData
        req = DescribeQuorumRequest(topics=[T(topic_name="__cluster_metadata", partitions=[
            T.PartitionData(partition_index=0)])])
        resp = await self.admin.pool.request(node, req)
        if resp.error_code or not resp.topics:
            return None
        p = resp.topics[0].partitions[0]
        return dict(leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                    high_watermark=p.high_watermark,
                    voters=[(v.replica_id, v.log_end_offset) for v in p.current_voters],
                    observers=[(v.replica_id, v.log_end_offset) for v in p.observers])

    async def _faults(self) -> dict | None:
        """minibroker's armed faults (FaultControl "list"); None where faults are off."""
        node, conn = await self.admin.pool.any_connection()
        try:
            resp = await conn.request(FaultControlRequest(command="list"), 0,
                                      timeout=self.admin.pool.request_timeout,
                                      response_class=FaultControlResponse)
        except Exception:  # noqa: BLE001 - the panel is optional
            self.admin.pool.close_node(node, "FaultControl failed")
            return None
        if resp.error_code:
            return dict(enabled=False, message=resp.error_message or "faults are off")
        try:
            state = json.loads(resp.state or "{}")
        except ValueError:
            state = {"state": resp.state}
        return dict(enabled=True, state=json.dumps(state, indent=2, sort_keys=True),
                    armed=bool(state) and any(state.values()))

    # ------------------------------------------------------------------ topics
    async def topics(self) -> list[dict]:
        await self.admin.metadata.fetch_all()
        out = []
        for name in sorted(self.admin.metadata.topics):
            t = self.admin.metadata.topics[name]
            if t.error_code or t.is_internal:
                continue
            parts = t.partitions.values()
            rf = max((len(p.replicas) for p in parts), default=0)
            out.append(dict(name=name, partitions=t.partition_count, replication_factor=rf,
                            under_replicated=sum(len(p.isr) < len(p.replicas) for p in parts),
                            offline=sum(p.leader < 0 for p in parts),
                            initial=t.initial_partition_count,
                            undeleted=t.undeleted_partition_count))
        return out

    async def _topic_md(self, name: str):
        await self.admin.metadata.refresh([name])
        t = self.admin.metadata.topic(name)
        if t is None or t.error_code:
            raise Missing(f"no topic {name!r} in the cluster")
        return t

    async def topic(self, name: str) -> dict:
        t = await self._topic_md(name)
        tps = [TopicPartition(name, p) for p in sorted(t.partitions)]
        offsets = await self._offsets(tps)
        sizes = await self._sizes(name, t)
        try:
            configs = (await self.admin.describe_configs(topics=[name])).get((2, name), {})
        except Errors.UnsupportedVersionError:          # librdkafka's mock cluster
            configs = {"(DescribeConfigs is not supported by the brokers)": None}
        parts = []
        for tp in tps:
            p = t.partitions[tp.partition]
            start, end = offsets.get(tp, (-1, -1))
            parts.append(dict(partition=p.partition, leader=p.leader, leader_epoch=p.leader_epoch,
                              replicas=list(p.replicas), isr=list(p.isr),
                              log_start_offset=start, high_watermark=end,
                              messages=max(0, end - start) if start >= 0 else "",
                              size=sizes.get(p.partition, ""),
                              marked=0 < t.undeleted_partition_count <= p.partition))
        return dict(name=name, topic_id=str(t.topic_id or ""), partitions=parts,
                    initial=t.initial_partition_count, undeleted=t.undeleted_partition_count,
                    configs=sorted(configs.items()))

    async def _offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        if not tps:
            return {}
        start = await self.admin.list_offsets({tp: "earliest" for tp in tps})
        end = await self.admin.list_offsets({tp: "latest" for tp in tps})
        return {tp: (start[tp][0], end[tp][0]) for tp in tps if tp in start and tp in end}

    async def _sizes(self, name: str, t) -> dict[int, int]:
        """Each partition's size in bytes on its leader (DescribeLogDirs); {} if not answered."""
        by_leader: dict[int, list[int]] = {}
        for p in t.partitions.values():
            by_leader.setdefault(p.leader, []).append(p.partition)
        out: dict[int, int] = {}
        T = DescribeLogDirsRequest.DescribableLogDirTopic
        for node, parts in sorted(by_leader.items()):
            if node < 0:
                continue
            try:
                resp = await self.admin.pool.request(node, DescribeLogDirsRequest(
                    topics=[T(topic=name, partitions=sorted(parts))]))
            except (Errors.KafkaError, OSError, asyncio.TimeoutError):
                continue
            for r in resp.results:
                for rt in r.topics:
                    for rp in rt.partitions:
                        if rp.partition_index in parts:
                            out[rp.partition_index] = rp.partition_size
        return out

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, str]) -> None:
        self.changed()
        await self.admin.create_topics([NewTopic(name, partitions, replication_factor, configs)])
        self.changed()

    async def delete_topic(self, name: str) -> None:
        await self.admin.delete_topics([name])
        self.changed()

    async def set_partition_count(self, name: str, count: int, confirm_delete: bool) -> str:
        t = await self._topic_md(name)
        current = t.producer_partition_count
        if count < current and not confirm_delete:
            raise ConsoleError(
                f"{count} is fewer than the {current} partitions {name} has: that marks "
                f"partitions {count}-{current - 1} for deletion (KIP-253). Tick the "
                "confirmation box to go ahead.")
        if count == current:
            raise ConsoleError(f"{name} already has {count} partitions")
        await self.admin.create_partitions({name: count})
        self.changed()
        verb = "added" if count > current else "marked for deletion"
        lo, hi = sorted((count, current))
        return f"{name}: partitions {lo}-{hi - 1} {verb}"

    # ------------------------------------------------------------------ messages
    async def start_offset(self, tp: TopicPartition, offset: str, timestamp: str) -> int:
        if timestamp.strip():
            ts = whole_number(timestamp, "timestamp (ms since the epoch)")
            found = await self.admin.list_offsets({tp: ts})
            off = found[tp][0]
            return off if off >= 0 else (await self.admin.list_offsets({tp: "latest"}))[tp][0]
        if offset.strip() in ("", "earliest"):
            return (await self.admin.list_offsets({tp: "earliest"}))[tp][0]
        if offset.strip() == "latest":
            return (await self.admin.list_offsets({tp: "latest"}))[tp][0]
        return whole_number(offset, "offset")

    async def read(self, tp: TopicPartition, start: int, limit: int, key_search: str = "",
                   timeout: float = 2.0) -> list:
        """Up to `limit` records of tp from `start` (those whose key contains `key_search`),
        fetched from the leader directly: a page view needs no consumer and no group."""
        end = (await self.admin.list_offsets({tp: "latest"}))[tp][0]
        want = key_search.encode()
        out: list = []
        scanned, offset = 0, start
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while offset < end and len(out) < limit and scanned < SEARCH_SCAN \
                and loop.time() < deadline:
            records, next_offset = await self._fetch(tp, offset)
            for r in records:
                scanned += 1
                if not want or (r.key is not None and want in r.key):
                    out.append(r)
            if next_offset <= offset:
                break                      # nothing readable here (a gap, or not yet replicated)
            offset = next_offset
        return out[:limit]

    async def _fetch(self, tp: TopicPartition, offset: int) -> tuple[list, int]:
        md = self.admin.metadata
        if md.leader(tp.topic, tp.partition) < 0:
            await md.refresh([tp.topic])
        leader = md.leader(tp.topic, tp.partition)
        if leader < 0:
            raise Errors.LeaderNotAvailableError(f"{tp.topic}-{tp.partition}")
        conn = await self.admin.pool.get(leader)
        cls = FetchRequestKip253
        req = cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=FETCH_BYTES,
                  isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                  rack_id="", topics=[cls.FetchTopic(
                      topic=tp.topic, undeleted_partition_count=-1, partitions=[
                          cls.FetchTopic.FetchPartition(
                              partition=tp.partition, current_leader_epoch=-1,
                              fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                              partition_max_bytes=FETCH_BYTES)])])
        try:
            resp = await conn.request(req, self.admin.pool.version(conn, cls, lo=4, hi=12),
                                      timeout=self.admin.pool.request_timeout,
                                      response_class=FetchResponse)
        except (OSError, ConnectionError, asyncio.TimeoutError):
            self.admin.pool.close_node(leader, "fetch failed")
            md.request_update(tp.topic)
            raise
        p = resp.responses[0].partitions[0]
        if p.error_code:
            md.request_update(tp.topic)
            raise Errors.for_code(p.error_code)(f"fetch {tp.topic}-{tp.partition} at {offset}")
        return decode_records(tp.topic, tp.partition, p.records, offset)

    async def produce(self, topic: str, partition: int | None, key: bytes | None,
                      value: bytes | None, headers: list[tuple[str, bytes]]):
        await self._topic_md(topic)
        async with self._producer_lock:
            if self._producer is None:
                p = Producer(self.bootstrap, client_id=self.client_id, enable_idempotence=False,
                             acks=-1, linger_ms=0, request_timeout_ms=self.request_timeout_ms,
                             delivery_timeout_ms=self.request_timeout_ms * 2)
                await p.start()
                self._producer = p
        fut = self._producer.send(topic, value, key=key, headers=headers, partition=partition)
        return await asyncio.wait_for(fut, self.request_timeout_ms / 1000 * 2)

    # ------------------------------------------------------------------ partition changes
    async def changes(self, name: str) -> dict:
        """A topic's KIP-253 state: per partition its role, leader epoch, epoch maps, drained."""
        t = await self._topic_md(name)
        tps = [TopicPartition(name, p) for p in sorted(t.partitions)]
        offsets = await self._offsets(tps)
        mini = await self.is_minibroker()
        epochs = await partition_leader_epochs(self.admin.pool, name, sorted(t.partitions)) \
            if mini else {}
        n, u = t.initial_partition_count, t.undeleted_partition_count
        rows = []
        for tp in tps:
            p = t.partitions[tp.partition]
            after, before = epochs.get(p.partition, ({}, {}))
            start, end = offsets.get(tp, (-1, -1))
            marked = 0 < u <= p.partition
            role = "marked for deletion" if marked else \
                "created by expansion" if after else "initial" if p.partition < max(n, 1) \
                else "added"
            rows.append(dict(partition=p.partition, role=role, leader=p.leader,
                             leader_epoch=p.leader_epoch, after=sorted(after.items()),
                             before=sorted(before.items()), log_start_offset=start,
                             high_watermark=end, drained=marked and start == end,
                             barrier=await self._barrier(name, after) if after else []))
        steps = _steps(rows, n, u, len(rows)) if mini else []
        return dict(name=name, initial=n, undeleted=u, count=len(rows), partitions=rows,
                    steps=steps, minibroker=mini)

    async def _barrier(self, topic: str, after: dict[int, int]) -> list[dict]:
        """The ordering barrier of a partition made by expansion: each lower partition's end
        offset under the epoch before the expansion (records to deliver first)."""
        out = []
        for lower, epoch in sorted(after.items()):
            try:
                end = await epoch_end_offset(self.admin.pool, self.admin.metadata, topic, lower,
                                             epoch)
            except Errors.KafkaError as e:
                end = f"not known yet ({type(e).__name__})"
            out.append(dict(partition=lower, leader_epoch=epoch, end_offset=end))
        return out

    async def reassignments(self) -> dict:
        """KIP-179 per-replica progress on minibroker; Kafka's ListPartitionReassignments
        elsewhere."""
        if await self.is_minibroker():
            try:
                rid, status = await self.admin.partition_assignment_status(-1)
            except Errors.KafkaError as e:
                return dict(request_id=None, message=type(e).__name__, replicas=[], moving=[])
            return dict(request_id=rid, message="", moving=[], replicas=[dict(
                topic=tp.topic, partition=tp.partition, broker=b, done=code == 0,
                error_code=code, numerator=num, denominator=den,
                percent=100 if code == 0 or den <= 0 else min(100, 100 * num // den))
                for (tp, b), (code, num, den) in sorted(status.items())])
        try:
            resp = await self.admin._to_controller(ListPartitionReassignmentsRequest(
                timeout_ms=self.request_timeout_ms, topics=None))
        except Errors.KafkaError as e:
            return dict(request_id=None, message=type(e).__name__, replicas=[], moving=[])
        return dict(request_id=None, message="", replicas=[], moving=[dict(
            topic=t.name, partition=p.partition_index, replicas=list(p.replicas),
            adding=list(p.adding_replicas), removing=list(p.removing_replicas))
            for t in resp.topics for p in t.partitions])


def _steps(rows: list[dict], n: int, u: int, count: int) -> list[tuple[str, bool]]:
    """The KIP-253 steps of the topic's last change, each with whether it is done."""
    created = [r for r in rows if r["role"] == "created by expansion"]
    marked = [r for r in rows if r["role"] == "marked for deletion"]
    steps: list[tuple[str, bool]] = [
        (f"partition count record: initial {n}, undeleted {u}, {count} partitions", n > 0)]
    if created:
        steps += [
            (f"leader epochs of partitions below {min(r['partition'] for r in created)} bumped",
             all(r["leader_epoch"] > e for c in created for p, e in c["after"]
                 for r in rows if r["partition"] == p)),
            (f"partitions {', '.join(str(r['partition']) for r in created)} created with "
             "leaderEpochAfterCreation", True),
            ("ordering barrier: lower partitions' end offsets under the old epochs known",
             all(isinstance(b["end_offset"], int) for c in created for b in c["barrier"]))]
    if marked:
        steps += [
            (f"partitions {', '.join(str(r['partition']) for r in marked)} marked for deletion "
             "with leaderEpochBeforeDeletion", True),
            ("surviving partitions' leader epochs bumped", True),
            ("marked partitions drained (log start offset = end offset)",
             all(r["drained"] for r in marked))]
    return steps


def whole_number(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConsoleError(f"invalid {what} {text.strip()!r}: expected a whole number") from None
