"""Every served request schema with its fields at their extremes (issue 42): null, empty, max and
min ints, negative, as well as plausible values, per field of the version's schema
(tests/fuzz/extremes.py). Each request is answered (with Kafka errors where it is wrong) or
refused with ProtocolViolation, the one-line close of its connection; no handler raises
anything else. Plus the two tracebacks an outside fuzzer found, as regression tests.

The cluster runs on virtual time: requests that wait (timeouts at their max) cost nothing.
Bounded for CI; the long run is `benchmarks/fuzz_long.py --extremes`.
"""
from __future__ import annotations

import asyncio
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from corpus import GROUP, TOPIC
from extremes import extreme_frame
from harness import Harness
from minibroker.broker.dispatch import HANDLERS, supported_versions
from minibroker.network.client import decode_response, encode_request
from minibroker.protocol.framing import ProtocolViolation
from minibroker.protocol.messages import ConsumerGroupDescribeRequest
from minibroker.testing.virtual_time import VirtualTimeLoop

KEYS = [(k, v) for k, lo, hi in supported_versions() for v in range(lo, hi + 1)]


@pytest.fixture(scope="module")
def harness():
    h = Harness(loop_factory=lambda: VirtualTimeLoop(deadlock_is_error=False))
    yield h
    h.close()


def _frame(req, version: int) -> bytes:
    return b"".join(bytes(p) for p in encode_request(req, version, 5, "regression"))[4:]


def test_offset_commit_with_a_retention_past_int64_is_kept_forever(harness):
    """OffsetCommit v3 retention_time_ms = 2^63-2: the expire timestamp (commit time +
    retention) does not fit an int64; it was a struct.error when the record was encoded."""
    for _ in range(50):          # the group's coordinator (its offsets partition) comes up
        raw = harness.answer(_frame(FindCoordinatorRequest(key=GROUP, key_type=0), 3))
        if decode_response(FindCoordinatorResponse, memoryview(raw)[4:], 3).error_code == 0:
            break
        harness.run(asyncio.sleep(0.1))
    C = OffsetCommitRequest
    req = C(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
            retention_time_ms=2**63 - 2, topics=[C.OffsetCommitRequestTopic(
                name=TOPIC, partitions=[C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=3, committed_metadata="")])])
    raw = harness.answer(_frame(req, 3))
    resp = decode_response(OffsetCommitResponse, memoryview(raw)[4:], 3)
    [topic] = resp.topics
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, 0)]


@pytest.mark.parametrize("group_ids", [[None], ["g", None]])
def test_consumer_group_describe_with_a_null_group_id_closes_the_connection(harness, caplog,
                                                                            group_ids):
    """group_ids=[null]: a null element of a []string (never nullable in Kafka) was an
    AttributeError in the coordinator; now the request is refused as Kafka's parser refuses it."""
    req = ConsumerGroupDescribeRequest(group_ids=group_ids, include_authorized_operations=False)
    with pytest.raises(ProtocolViolation, match=r"null group_ids\[\d\]"):
        harness.answer(_frame(req, 0))


SETTINGS = settings(max_examples=4000, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.sampled_from(KEYS), st.integers(0, 2**32))
def test_every_schema_with_extreme_fields_is_answered_or_refused(harness, key_version, seed):
    key, version = key_version
    frame = extreme_frame(HANDLERS[key].request_class, version, random.Random(seed))
    if frame is None:       # values kafka-python's encoder cannot write (e.g. a null uuid)
        return
    harness.send(frame)
    failures, harness.failures = harness.failures, []
    assert failures == [], f"key {key} v{version} seed {seed}"


def test_every_schema_and_version_gets_extreme_requests():
    """The generator covers every served (key, version): none is left out by encoding."""
    missing = [(k, v) for k, v in KEYS
               if not any(extreme_frame(HANDLERS[k].request_class, v, random.Random(s))
                          for s in range(5))]
    assert missing == []
    assert struct.unpack_from(">h", extreme_frame(HANDLERS[8].request_class, 3,
                                                  random.Random(0)))[0] == 8
