"""The shared part of every Python driver's ``GroupMember``: one subscribed consumer-group member
running its client's poll loop in its own thread, recording what it was assigned, consumed and
committed, with a global sequence number so the test can order events across members.

A driver's ``GroupMember(bs, topic, group, name, trace)`` subclass implements ``_loop()``: create
the client's consumer subscribed to ``topic`` in ``group`` (classic protocol, eager assignors,
``auto.offset.reset=earliest``, no auto commit), and until ``self.stopping`` is set: poll, hand
every record to ``self.got(...)``, and, while ``self.commit_enabled``, commit the batch's next
offsets synchronously and report them with ``self.committed(...)``. Rebalance callbacks call
``self.assigned(partitions)`` / ``self.revoked(partitions)``. On stop the consumer is closed
without committing (so it sends LeaveGroup).
"""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
POLL_S = 0.1


@dataclass
class Trace:
    """Events of every member of one scenario, numbered in one global order."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    seq: itertools.count = field(default_factory=itertools.count)
    # (seq, member, partition, offset, key, value)
    consumed: list = field(default_factory=list)
    # (seq, member, {partition: next offset}) for each successful commit
    commits: list = field(default_factory=list)
    # (seq, member, "assigned"|"revoked", sorted partitions)
    rebalances: list = field(default_factory=list)
    # (seq, member, repr(error)) for failed commits (allowed: at-least-once) and loop errors
    errors: list = field(default_factory=list)


class GroupMemberBase:
    def __init__(self, bs: str, topic: str, group: str, name: str, trace: Trace):
        self.bs, self.topic, self.group, self.name, self.trace = bs, topic, group, name, trace
        self.commit_enabled = True
        self.stopping = threading.Event()
        self.closed = threading.Event()
        self.current: set[int] = set()
        self.assign_count = 0
        self.fatal: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"group-member-{name}",
                                        daemon=True)

    # -------------------------------------------------------------- called by the client loop
    def assigned(self, partitions) -> None:
        parts = sorted(int(p) for p in partitions)
        with self.trace.lock:
            self.current = set(parts)
            self.assign_count += 1
            self.trace.rebalances.append((next(self.trace.seq), self.name, "assigned", parts))

    def revoked(self, partitions) -> None:
        parts = sorted(int(p) for p in partitions)
        with self.trace.lock:
            self.current -= set(parts)
            self.trace.rebalances.append((next(self.trace.seq), self.name, "revoked", parts))

    def got(self, partition: int, offset: int, key, value) -> None:
        with self.trace.lock:
            self.trace.consumed.append((next(self.trace.seq), self.name, int(partition),
                                        int(offset), bytes(key) if key is not None else None,
                                        bytes(value) if value is not None else None))

    def committed(self, offsets: dict[int, int]) -> None:
        with self.trace.lock:
            self.trace.commits.append((next(self.trace.seq), self.name, dict(offsets)))

    def commit_failed(self, err) -> None:
        with self.trace.lock:
            self.trace.errors.append((next(self.trace.seq), self.name, repr(err)))

    def listener(self, base: type = object):
        """A rebalance listener (a subclass of the client's listener class `base`) that reports
        to this member."""
        member = self

        class Listener(base):
            def on_partitions_revoked(self, revoked):
                member.revoked(tp.partition for tp in revoked)

            def on_partitions_assigned(self, assigned):
                member.assigned(tp.partition for tp in assigned)

        return Listener()

    def got_batch(self, batch) -> list[tuple[int, int]]:
        """Hands a {TopicPartition: [records]} poll result to got(), partition by partition;
        returns its (partition, offset) pairs."""
        seen = []
        for tp in sorted(batch, key=lambda t: t.partition):
            for m in batch[tp]:
                self.got(m.partition, m.offset, m.key, m.value)
                seen.append((m.partition, m.offset))
        return seen

    async def commit_batch(self, seen, commit) -> None:
        """While commits are enabled, `await commit({partition: next offset})` for a batch's
        (partition, offset) pairs and record the outcome (a failure is allowed: at-least-once)."""
        if not (seen and self.commit_enabled):
            return
        offsets = self.next_offsets(seen)
        try:
            await commit(offsets)
        except Exception as e:  # noqa: BLE001 — at-least-once: redelivered later
            self.commit_failed(e)
        else:
            self.committed(offsets)

    @staticmethod
    def next_offsets(records) -> dict[int, int]:
        """{partition: last offset + 1} of a batch of (partition, offset) pairs."""
        out: dict[int, int] = {}
        for p, o in records:
            out[p] = max(out.get(p, 0), o + 1)
        return out

    # -------------------------------------------------------------- control, from the test
    def start(self) -> "GroupMemberBase":
        self._thread.start()
        return self

    def close(self, timeout: float = 20.0) -> None:
        """Stop polling and close the consumer (LeaveGroup, no commit); bounded."""
        self.stopping.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"member {self.name} did not close within {timeout}s")

    def _main(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # noqa: BLE001 — reported to the test through .fatal
            self.fatal = e
            with self.trace.lock:
                self.trace.errors.append((next(self.trace.seq), self.name, f"fatal {e!r}"))
        finally:
            self.closed.set()

    def _loop(self) -> None:  # pragma: no cover - implemented per client
        raise NotImplementedError


def wait_until(pred, timeout: float, what: str, interval: float = 0.1, members=()):
    """Poll ``pred()`` until truthy (returned) or raise after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        for m in members:
            if m.fatal is not None:
                raise AssertionError(f"member {m.name} failed: {m.fatal!r}") from m.fatal
        got = pred()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
