"""KIP-455 (AlterPartitionReassignments / ListPartitionReassignments), Kafka's own reassignment API,
through kafka-python's KafkaAdminClient: a move runs on the KIP-179 machinery (so
PartitionAssignmentStatus follows it too), shows up in the list while it runs, and a cancel
moves the partition back and deletes the replica that was being added."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import (InvalidReplicationAssignmentError, NoReassignmentInProgressError,
                          ReassignmentInProgressError, UnknownTopicOrPartitionError)

from minibroker.client import Admin, TopicPartition as TP
from minibroker.cluster import Cluster
from minibroker.protocol.errors import PARTITION_REASSIGNMENT_IN_PROGRESS as IN_PROGRESS
from tests.controller.test_reassignment import _cluster_with, _moved

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(60)]


def _kafka_python(bootstrap: str, calls: list) -> list:
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        out = []
        for name, arg in calls:
            if name == "alter":
                out.append(admin.alter_partition_reassignments(
                    {TopicPartition(t, p): r for (t, p), r in arg.items()}))
            else:
                out.append(admin.list_partition_reassignments(arg))
        return out
    finally:
        admin.close()


async def test_kafka_python_moves_lists_and_cancels():
    async with Cluster(brokers=4) as c, Admin(c.bootstrap) as admin:
        await _cluster_with(c, "t", [1, 2], 4)
        await _cluster_with(c, "u", [1, 2], 2)
        await c.stop_broker(4)                          # "u"'s move to 4 cannot finish
        [started, listed] = await asyncio.to_thread(_kafka_python, c.bootstrap, [
            ("alter", {("u", 0): [1, 4], ("nope", 0): [1], ("t", 0): [1, 9]}), ("list", None)])
        assert {(tp.topic, tp.partition): e for tp, e in started.items()} == {
            ("u", 0): None, ("nope", 0): UnknownTopicOrPartitionError,
            ("t", 0): InvalidReplicationAssignmentError}
        assert {(tp.topic, tp.partition): v for tp, v in listed.items()} == {("u", 0): {
            "replicas": [1, 4, 2], "adding_replicas": [4], "removing_replicas": [2]}}
        _, progress = await admin.partition_assignment_status()        # the latest request
        assert progress[(TP("u", 0), 4)] == (IN_PROGRESS, 0, 3)
        # One at a time; a cancel of a partition not moving says so; a cancel moves "u" back.
        [busy, cancel] = await asyncio.to_thread(_kafka_python, c.bootstrap, [
            ("alter", {("t", 0): [2, 3]}), ("alter", {("t", 0): None, ("u", 0): None})])
        assert {tp.topic: e for tp, e in busy.items()} == {"t": ReassignmentInProgressError}
        assert {tp.topic: e for tp, e in cancel.items()} == {
            "t": NoReassignmentInProgressError, "u": None}
        reg = (await c.active_controller()).partition("u", 0)
        assert (reg.replicas, reg.reassigning) == ((1, 2), False)
        _, progress = await admin.partition_assignment_status()
        assert progress[(TP("u", 0), 4)][0] == NoReassignmentInProgressError.errno
        # Now "t" can move, through kafka-python; it finishes and leaves the list.
        [moved] = await asyncio.to_thread(_kafka_python, c.bootstrap,
                                          [("alter", {("t", 0): [2, 3]})])
        assert list(moved.values()) == [None]
        await _moved(c, "t", [2, 3])
        assert await asyncio.to_thread(_kafka_python, c.bootstrap, [("list", None)]) == [{}]
        assert (await c.partition_state("t", 0))["logs"][3]["log_end_offset"] == 4
