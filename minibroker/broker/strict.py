"""Strict mode (`serve --strict`, `Cluster(strict=True)`): the broker serves exactly as Kafka does
and records each protocol rule a client breaks, with the rule's name, the request and where the
rule is written down. `Cluster.violations` lists them (ThreadedCluster and the pytest fixtures
too), each trace line carries its own, and one WARNING log line says it as it happens.

It sees what the tracer (broker/trace.py) sees: every request and response of the client
listeners, decoded, plus each connection's history; the checks keep their own state across
connections and brokers (one Strict per cluster). Rules are judged from the exchanges alone, as
a client author reading a packet capture would; nothing here changes an answer.
"""
from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any

from minibroker.broker.context import Services
from minibroker.broker.dispatch import decode_exact
from minibroker.coordinator.positions import parse_assignment
from minibroker.protocol.framing import ProtocolViolation, parse_request_header

log = logging.getLogger("minibroker.strict")

GUIDE = "Kafka protocol guide (kafka.apache.org/protocol)"
# rule name → where Kafka states it
RULES = {
    "version-not-negotiated": f"{GUIDE}, 'Versioning and Compatibility'; KIP-35: use a version "
                              "within the range this connection's ApiVersions advertised",
    "correlation-id-reused": f"{GUIDE}, 'Requests and Responses': the correlation id is how a "
                             "client matches responses; one in flight must not be reused",
    "flexible-header-missing": "KIP-482: a flexible version's request header (v2) ends with "
                               "tagged fields",
    "throttle-ignored": "KIP-219: a client must not send on a connection before the "
                        "throttle_time_ms of its last response has passed",
    "metadata-storm": "KIP-580 / metadata.max.age.ms, retry.backoff.ms: Metadata refreshes "
                      "back off while nothing changes",
    "find-coordinator-storm": "KIP-580 / retry.backoff.ms: FindCoordinator retries back off "
                              "while nothing changes",
    "reconnect-storm": "KIP-144 / reconnect.backoff.ms: reconnecting to a broker backs off",
    "sequence-reset-without-epoch-bump": "KIP-98, KIP-360: an idempotent producer restarts "
                                         "sequence 0 only with a new producer epoch",
    "sequence-gap": "KIP-98: an idempotent producer's batches carry consecutive sequences per "
                    "partition",
    "stale-generation-commit": "KIP-62 / KIP-848: after being told to rejoin, a member commits "
                               "only with its new generation (member epoch)",
    "fetch-unassigned-partition": f"{GUIDE}, 'Group Membership API': a group member fetches "
                                  "the partitions assigned to it",
    "join-ignores-member-id-required": "KIP-394: JoinGroup v4+ answered MEMBER_ID_REQUIRED "
                                       "rejoins with the member id it was given",
    "produce-before-add-partitions": "KIP-98: a transactional producer adds a partition with "
                                     "AddPartitionsToTxn before producing to it (before KIP-890's "
                                     "Produce v12)",
}

REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 27, 22, 25
STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH, MEMBER_ID_REQUIRED = 113, 110, 79
RECONNECTS_PER_SECOND = 10
# The checks' `state`: trace.py's per-connection _Conn (trace.py imports this module).
FETCH_GRACE_S = 1.0         # fetches in flight when an assignment changed are not the client's


class Strict:
    def __init__(self, config: Any) -> None:
        self.storm = config.strict_storm_per_second
        # set by on_request: a broker's topic id → name
        self._topics_by_id: Callable[[Any], str | None] | None = None
        self.violations: list[dict[str, Any]] = []
        # (client id, api key) → times (s) of requests answered as the one before
        self._unchanged: dict[tuple[Any, int], collections.deque[float]] = {}
        self._last_answer: dict[tuple[Any, int], Any] = {}
        # (client id, broker) → times
        self._connects: dict[tuple[Any, int], collections.deque[float]] = {}
        # (topic, partition, pid) → (epoch, next)
        self._sequences: dict[tuple[str, int, int], tuple[int, int]] = {}
        # (group, member) → generation then
        self._told_to_rejoin: dict[tuple[str, str], int] = {}
        # client id → {member id: (since, partitions)}: judged only for a client id that one
        # member uses (a process running several members under one id is not told apart)
        self._assigned: dict[str | None, dict[str, tuple[float, set[tuple[Any, int]]]]] = {}
        self._txn_partitions: dict[str, set[tuple[str, int]]] = {}  # transactional id → added
        self._commits_after_rejoin: set[tuple[int, int, int]] = set()   # (broker, conn, corr)

    # ------------------------------------------------------------------ recording
    def record(self, rule: str, line: dict[str, Any], detail: str) -> None:
        v = {"rule": rule, "reference": RULES[rule], "detail": detail} | {
            k: line[k] for k in ("time", "broker", "conn", "client_id", "software", "api",
                                 "version", "corr") if k in line}
        self.violations.append(v)
        line.setdefault("violations", []).append(v)
        log.warning("strict: %s by client %r (%s v%s, correlation id %s): %s", rule,
                    line.get("client_id"), line.get("api"), line.get("version"), line.get("corr"),
                    detail)

    # ------------------------------------------------------------------ requests
    def on_request(self, broker: Services, state: Any, line: dict[str, Any], req: Any,
                   frame: memoryview) -> None:
        key, version, corr = line.get("api_key"), line.get("version"), line.get("corr")
        if key is None:
            return
        now = broker.clock.monotonic()
        if corr in state.in_flight:
            self.record("correlation-id-reused", line, f"correlation id {corr} is still in flight")
        state.in_flight.add(corr)
        if state.negotiated is not None and key != 18:
            rng = state.negotiated.get(key)
            if rng is None or version > rng[1]:
                self.record("version-not-negotiated", line,
                            f"v{version}; this connection's ApiVersions advertised "
                            + (f"{rng[0]}-{rng[1]}" if rng else "no such API"))
        if now < state.throttled_until:
            self.record("throttle-ignored", line,
                        f"sent {round((state.throttled_until - now) * 1000)} ms before the "
                        "throttle ended")
            state.throttled_until = 0.0
        if "undecodable" in line:
            self._flexible_header(broker, line, frame)
        if not state.spoke:
            state.spoke = True
            self._connected(line, now)
        if req is None:
            return
        if key == 1 and self._topics_by_id is None:
            cache = broker.metadata
            self._topics_by_id = lambda tid: getattr(cache.topics_by_id.get(tid), "name", None)
        check = self._request_checks.get(key)
        if check is not None:
            check(self, state, line, req, now)

    def _flexible_header(self, broker: Services, line: dict[str, Any], frame: memoryview) -> None:
        handler = broker.handlers.get(line["api_key"])
        if handler is None or line["version"] < handler.flexible_from:
            return
        try:
            header = parse_request_header(frame, False)      # as if header v1: no tag section
            decode_exact(handler.request_class, frame[header.body_offset:], line["version"])
        except ProtocolViolation:
            return
        self.record("flexible-header-missing", line,
                    f"v{line['version']} is flexible; the request header has no tagged fields")

    def _connected(self, line: dict[str, Any], now: float) -> None:
        times = self._connects.setdefault((line.get("client_id"), line["broker"]),
                                          collections.deque())
        times.append(now)
        while times and now - times[0] > 1.0:
            times.popleft()
        if len(times) > RECONNECTS_PER_SECOND:
            self.record("reconnect-storm", line,
                        f"{len(times)} connections to broker {line['broker']} within 1 s")
            times.clear()

    def _produce(self, state: Any, line: dict[str, Any], req: dict[str, Any], now: float) -> None:
        txn = req.get("transactional_id")
        added = self._txn_partitions.get(txn, set()) if txn is not None else None
        for t in req["topic_data"]:
            for p in t["partition_data"]:
                for b in p["records"] or []:
                    if b.get("producer_id", -1) < 0:
                        continue
                    tp = (t["name"], p["index"])
                    if added is not None and b.get("transactional") and line["version"] < 12 \
                            and tp not in added:
                        self.record("produce-before-add-partitions", line,
                                    f"{tp[0]}-{tp[1]} not added to transaction {txn!r}")
                    self._sequence(line, tp, b)

    def _sequence(self, line: dict[str, Any], tp: tuple[str, int], b: dict[str, Any]) -> None:
        key = (tp[0], tp[1], b["producer_id"])
        last = self._sequences.get(key)
        if last is None or b["base_sequence"] < 0:
            return
        epoch, expected = last
        if b["producer_epoch"] != epoch:
            return
        if b["base_sequence"] == 0 and expected > 0:
            self.record("sequence-reset-without-epoch-bump", line,
                        f"{tp[0]}-{tp[1]}: producer {b['producer_id']} epoch {epoch} restarted at "
                        f"sequence 0, expected {expected}")
        elif b["base_sequence"] > expected:
            self.record("sequence-gap", line,
                        f"{tp[0]}-{tp[1]}: producer {b['producer_id']} sent sequence "
                        f"{b['base_sequence']}, expected {expected}")

    def _offset_commit(self, state: Any, line: dict[str, Any], req: Any, now: float) -> None:
        # Judged on the answer: stale only if the coordinator refuses the generation/epoch.
        if (req.group_id, req.member_id) in self._told_to_rejoin:
            self._commits_after_rejoin.add((line["broker"], line["conn"], line["corr"]))

    def _join_group(self, state: Any, line: dict[str, Any], req: Any, now: float) -> None:
        given = state.member_id_required.pop(req.group_id, None)
        if given is not None and req.member_id == "":
            self.record("join-ignores-member-id-required", line,
                        f"group {req.group_id!r}: joined again without the member id {given!r}")

    def _fetch(self, state: Any, line: dict[str, Any], req: Any, now: float) -> None:
        if getattr(req, "replica_id", -1) >= 0:
            return
        members = self._assigned.get(line.get("client_id"))
        if members is None or len(members) != 1:
            return
        [assigned] = members.values()
        if now - assigned[0] < FETCH_GRACE_S:
            return
        by_id = self._topics_by_id
        for t in req.topics:
            name = t.topic or (by_id(t.topic_id) if by_id else None)
            tid = getattr(t, "topic_id", None)
            for p in t.partitions:
                tp = (name, p.partition)
                if tp[0] and tp not in assigned[1] and (tid, p.partition) not in assigned[1]:
                    self.record("fetch-unassigned-partition", line,
                                f"{tp[0]}-{tp[1]} is not assigned to this group member")
                    return

    _request_checks = {0: _produce, 8: _offset_commit, 11: _join_group, 1: _fetch}

    # ------------------------------------------------------------------ responses
    def on_response(self, broker: Services, state: Any, line: dict[str, Any], req: Any,
                    out: dict[str, Any], resp: Any) -> None:
        state.in_flight.discard(line.get("corr"))
        if resp is None:
            return
        key = line["api_key"]
        now = broker.clock.monotonic()
        throttle = getattr(resp, "throttle_time_ms", 0) or 0
        if throttle > 0:
            state.throttled_until = now + throttle / 1000
        if key == 18 and resp.error_code == 0:
            state.negotiated = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        elif key in (3, 10):
            self._storm(line, key, out.get("fields"), now)
        if req is None:
            return
        check = self._response_checks.get(key)
        if check is not None:
            check(self, state, line, req, resp, now)

    def _storm(self, line: dict[str, Any], key: int, answer: Any, now: float) -> None:
        who = (line.get("client_id"), key)
        times = self._unchanged.setdefault(who, collections.deque())
        if self._last_answer.get(who) != answer:
            self._last_answer[who] = answer
            times.clear()
            return
        times.append(now)
        while times and now - times[0] > 1.0:
            times.popleft()
        if len(times) > self.storm:
            rule = "metadata-storm" if key == 3 else "find-coordinator-storm"
            self.record(rule, line, f"{len(times)} requests within 1 s answered the same")
            times.clear()

    def _produce_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                          now: float) -> None:
        ok = {(t.name, p.index) for t in resp.responses for p in t.partition_responses
              if p.error_code == 0}
        for t in req["topic_data"]:
            for p in t["partition_data"]:
                for b in p["records"] or []:
                    if b.get("producer_id", -1) >= 0 and (t["name"], p["index"]) in ok \
                            and b["base_sequence"] >= 0:
                        self._sequences[(t["name"], p["index"], b["producer_id"])] = \
                            (b["producer_epoch"], (b["base_sequence"] + b["count"]) & 0x7fffffff)

    def _heartbeat_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                            now: float) -> None:
        if resp.error_code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
            self._told_to_rejoin[(req.group_id, req.member_id)] = req.generation_id
        elif resp.error_code == 0:
            self._told_to_rejoin.pop((req.group_id, req.member_id), None)

    def _consumer_heartbeat_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                                     now: float) -> None:
        if resp.error_code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            self._told_to_rejoin[(req.group_id, req.member_id)] = req.member_epoch
        elif resp.error_code == 0 and resp.member_id:
            self._told_to_rejoin.pop((req.group_id, resp.member_id), None)
            if resp.assignment is not None:
                self._assigned.setdefault(line.get("client_id"), {})[resp.member_id] = (now, {
                    (tid, p) for t in resp.assignment.topic_partitions for tid in [t.topic_id]
                    for p in t.partitions})

    def _offset_commit_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                                now: float) -> None:
        key = (line["broker"], line["conn"], line["corr"])
        if key not in self._commits_after_rejoin:
            return
        self._commits_after_rejoin.discard(key)
        codes = {p.error_code for t in resp.topics for p in t.partitions}
        if codes & {ILLEGAL_GENERATION, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID}:
            self.record("stale-generation-commit", line,
                        f"group {req.group_id!r}: member {req.member_id!r} committed with "
                        f"generation/epoch {req.generation_id_or_member_epoch} after it was "
                        "told to rejoin")

    def _join_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                       now: float) -> None:
        if resp.error_code == MEMBER_ID_REQUIRED and line["version"] >= 4:
            state.member_id_required[req.group_id] = resp.member_id
        elif resp.error_code == 0:
            self._told_to_rejoin.pop((req.group_id, resp.member_id), None)

    def _sync_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                       now: float) -> None:
        if resp.error_code == 0 and line.get("client_id"):
            self._assigned.setdefault(line["client_id"], {})[req.member_id] = (
                now, parse_assignment(resp.assignment))

    def _leave_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                        now: float) -> None:
        members = self._assigned.get(line.get("client_id"), {})
        left = [m.member_id for m in getattr(req, "members", None) or ()] or [req.member_id]
        for member_id in left:
            members.pop(member_id, None)

    def _add_partitions_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                                 now: float) -> None:
        if line["version"] > 3:
            return
        added = self._txn_partitions.setdefault(req.v3_and_below_transactional_id, set())
        for t in resp.results_by_topic_v3_and_below:
            for p in t.results_by_partition:
                if p.partition_error_code == 0:
                    added.add((t.name, p.partition_index))

    def _end_txn_answered(self, state: Any, line: dict[str, Any], req: Any, resp: Any,
                          now: float) -> None:
        self._txn_partitions.pop(req.transactional_id, None)

    _response_checks = {0: _produce_answered, 8: _offset_commit_answered, 11: _join_answered,
                        12: _heartbeat_answered, 13: _leave_answered, 14: _sync_answered,
                        24: _add_partitions_answered, 26: _end_txn_answered,
                        68: _consumer_heartbeat_answered}
