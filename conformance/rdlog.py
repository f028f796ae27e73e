"""librdkafka's log, routed through Python logging so the suite can see protocol errors.

librdkafka reports a response it cannot parse as a PROTOERR log line and carries on (it drops
the response and retries), so a broker encoding bug shows up only there. Every librdkafka client
the suite creates gets ``logger=LOG`` (kcat's stderr goes through ``note``); conftest fails any
test during which one was logged."""
from __future__ import annotations

import logging
import threading

LOG = logging.getLogger("conformance.librdkafka")
_lock = threading.Lock()
_errors: list[str] = []


def note(line: str) -> None:
    """Keep `line` if it is a protocol error (also for kcat's stderr: ``%3|ts|PROTOERR|...``)."""
    if line.startswith("PROTOERR") or "|PROTOERR|" in line or "parse failure" in line:
        with _lock:
            _errors.append(line)


class _Collect(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        note(record.getMessage())


LOG.addHandler(_Collect())
LOG.setLevel(logging.INFO)


def take() -> list[str]:
    """The protocol errors logged since the last call."""
    with _lock:
        out = list(_errors)
        _errors.clear()
    return out
