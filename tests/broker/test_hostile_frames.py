"""Malformed requests that used to reach a handler or slip past the connection (issue 25, item 5):
a null array or string where the schema allows none closes only that connection with one log line
(no "handler failed" traceback); a failure inside `minibroker serve` is not chained to "No module
named 'uvloop'". Raw sockets against the real cluster of test_bad_input.
"""
from __future__ import annotations

import asyncio
import struct
import sys

import pytest

from minibroker.cli import serve as cli
from test_bad_input import (assert_closed, closing_lines, frame, header,  # noqa: F401
                            setup)

NULL_ARRAY = struct.pack(">i", -1)
NULL_STRING = struct.pack(">h", -1)

# (api key, version, body): each field named here is not nullable at that version.
NULL_CASES = {
    "CreateTopics_v0_topics": (19, 0, NULL_ARRAY + struct.pack(">i", 1000)),
    "DeleteTopics_v0_topic_names": (20, 0, NULL_ARRAY + struct.pack(">i", 1000)),
    "OffsetFetch_v1_group_id": (9, 1, NULL_STRING + NULL_ARRAY),
    "ListOffsets_v1_topics": (2, 1, struct.pack(">i", -1) + NULL_ARRAY),
    "DescribeGroups_v0_groups": (15, 0, NULL_ARRAY),
    # topics [name "t", count 3, assignments [broker_ids null]], timeout, validate_only: found by
    # benchmarks/fuzz_long.py (the handler's own task failed unseen)
    "CreatePartitions_v0_broker_ids": (37, 0, struct.pack(">ih", 1, 1) + b"t" + struct.pack(
        ">ii", 3, 1) + NULL_ARRAY + struct.pack(">ib", 1000, 0)),
}


@pytest.mark.parametrize("case", sorted(NULL_CASES))
async def test_null_where_not_nullable_closes_with_one_line(setup, caplog, case):
    api_key, version, body = NULL_CASES[case]
    reader, writer = await setup.open_raw()
    writer.write(frame(header(api_key, version) + body))
    await writer.drain()
    await assert_closed(reader)
    writer.close()
    [line] = closing_lines(caplog)
    assert "which is not nullable" in line, line
    assert not [r for r in caplog.records if "handler failed" in r.getMessage()]
    assert not [r for r in caplog.records if r.exc_info]
    await setup.assert_broker_unharmed()


def test_a_failure_in_serve_is_not_chained_to_the_missing_uvloop(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)       # import uvloop -> ImportError

    async def fails():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError) as e:
        cli._run(fails())
    assert e.value.__context__ is None and e.value.__cause__ is None
