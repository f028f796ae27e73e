"""CreatePartitions as an autoscaling client meets it (issue 23, broker side): the answer after
the controller's commit while a slow broker still shows the old count, per-topic results, the
KIP-599 mutation quota (strict v3, permissive v2), timeout_ms, and the fault hooks forcing each."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import (InvalidPartitionsError, PolicyViolationError, RequestTimedOutError,
                          ThrottlingQuotaExceededError, TopicAlreadyExistsError)
from kafka.protocol.admin import CreatePartitionsRequest

from minibroker.broker.controller_quota import ControllerMutationQuota
from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection

pytestmark = pytest.mark.timeout(30)

CP = CreatePartitionsRequest.CreatePartitionsTopic
THROTTLED = ThrottlingQuotaExceededError.errno


def _req(counts: dict[str, int], timeout_ms: int = 5000, validate_only: bool = False):
    return CreatePartitionsRequest(topics=[CP(name=n, count=c, assignments=None)
                                           for n, c in counts.items()],
                                   timeout_ms=timeout_ms, validate_only=validate_only)


async def _conn(c: Cluster, broker_id: int = 1, client_id: str = "scaler"):
    b = c.brokers[broker_id]
    return await KafkaClientConnection.connect(b.host, b.port, client_id=client_id)


def _count(c: Cluster, broker_id: int, topic: str) -> int:
    return c.brokers[broker_id].metadata.topics[topic].undeleted_partition_count


def _results(resp) -> dict[str, int]:
    return {r.name: r.error_code for r in resp.results}


async def test_answers_after_commit_while_a_delayed_broker_still_shows_the_old_count():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 4)
        c.set_metadata_propagation_delay(3, 5000)
        conn = await _conn(c)
        loop = asyncio.get_running_loop()
        start = loop.time()
        resp = await conn.request(_req({"t": 8}), 3)
        assert _results(resp) == {"t": 0}
        assert loop.time() - start < 5.0          # not held back by broker 3
        assert _count(c, 1, "t") == _count(c, 2, "t") == 8
        assert _count(c, 3, "t") == 4             # stale: its UpdateMetadata is not applied yet
        await asyncio.sleep(5.1)
        assert _count(c, 3, "t") == 8
        c.set_metadata_propagation_delay(3, None)
        conn.close()


async def test_delay_as_a_broker_config_and_applies_in_order():
    async with Cluster(brokers=2, minibroker_metadata_propagation_delay_ms=1000) as c:
        await c.create_topic("t", 2)      # waits until both brokers show it
        conn = await _conn(c)
        assert _results(await conn.request(_req({"t": 3}), 3)) == {"t": 0}
        assert _results(await conn.request(_req({"t": 5}), 3)) == {"t": 0}
        assert _count(c, 2, "t") == 2
        await asyncio.sleep(1.05)
        assert _count(c, 2, "t") in (3, 5)
        await asyncio.sleep(1.05)
        assert _count(c, 2, "t") == 5
        conn.close()


async def test_partial_success_across_topics():
    async with Cluster(brokers=1) as c:
        for t in ("a", "b", "c"):
            await c.create_topic(t, 2)
        c.fail_create_partitions("b", PolicyViolationError)
        conn = await _conn(c)
        resp = await conn.request(_req({"a": 4, "b": 4, "c": 1}), 3)
        assert _results(resp) == {"a": 0, "b": PolicyViolationError.errno,
                                  "c": InvalidPartitionsError.errno}
        assert (_count(c, 1, "a"), _count(c, 1, "b")) == (4, 2)
        # the forced error was used up: b goes through now
        assert _results(await conn.request(_req({"b": 4}), 3)) == {"b": 0}
        conn.close()


async def test_decrease_without_ordered_delivery_is_invalid_partitions():
    async with Cluster(brokers=1) as c:
        await c.create_topic("plain", 4, configs={"enable.ordered.delivery": "false"})
        await c.create_topic("ordered", 4)
        conn = await _conn(c)
        await conn.request(_req({"plain": 6, "ordered": 6}), 3)
        resp = await conn.request(_req({"plain": 5, "ordered": 5}), 3)
        assert _results(resp) == {"plain": InvalidPartitionsError.errno, "ordered": 0}
        conn.close()


async def test_mutation_quota_strict_v3_refuses_per_topic_with_throttle_time():
    async with Cluster(brokers=1, controller_mutation_rate=2.0) as c:   # burst 2 * 11 = 22
        for t in ("a", "b", "c"):
            await c.create_topic(t, 1)
        conn = await _conn(c)
        resp = await conn.request(_req({"a": 31, "b": 2}), 3)     # a: 30 mutations, 22 -> -8
        assert _results(resp) == {"a": 0, "b": THROTTLED}
        assert 3900 <= resp.throttle_time_ms <= 4000               # 8 tokens at 2/s
        assert resp.results[1].error_message
        assert _count(c, 1, "b") == 1
        await asyncio.sleep(resp.throttle_time_ms / 1000)
        assert _results(await conn.request(_req({"b": 2}), 3)) == {"b": 0}
        # another client id has its own bucket; a per-client override
        c.set_controller_mutation_rate(0.0, client_id="frozen")
        other = await _conn(c, client_id="frozen")
        first = await other.request(_req({"c": 2}), 3)
        assert _results(first) == {"c": 0}                         # a bucket at 0 admits once
        assert _results(await other.request(_req({"c": 3}), 3)) == {"c": THROTTLED}
        conn.close()
        other.close()


async def test_mutation_quota_permissive_before_v3_does_it_and_says_back_off():
    async with Cluster(brokers=1, controller_mutation_rate=1.0) as c:   # burst 11
        await c.create_topic("a", 1)
        await c.create_topic("b", 1)
        conn = await _conn(c)
        resp = await conn.request(_req({"a": 16}), 2)               # 15: 11 -> -4
        assert _results(resp) == {"a": 0} and 3900 <= resp.throttle_time_ms <= 4000
        resp = await conn.request(_req({"b": 2}), 2)                 # still in debt: done anyway
        assert _results(resp) == {"b": 0} and resp.throttle_time_ms > 4000
        assert _count(c, 1, "b") == 2
        conn.close()


async def test_forced_throttling_and_validate_only_costs_nothing():
    async with Cluster(brokers=1, controller_mutation_rate=1.0) as c:
        await c.create_topic("a", 1)
        c.fail_create_partitions("a", ThrottlingQuotaExceededError, times=2, throttle_time_ms=700)
        conn = await _conn(c)
        for _ in range(2):
            resp = await conn.request(_req({"a": 2}), 3)
            assert _results(resp) == {"a": THROTTLED} and resp.throttle_time_ms == 700
        resp = await conn.request(_req({"a": 40}, validate_only=True), 3)
        assert _results(resp) == {"a": 0} and resp.throttle_time_ms == 0
        assert _results(await conn.request(_req({"a": 2}), 3)) == {"a": 0}
        # v2 cannot be told THROTTLING_QUOTA_EXCEEDED: done, with the throttle time
        c.fail_create_partitions("a", ThrottlingQuotaExceededError, throttle_time_ms=300)
        resp = await conn.request(_req({"a": 3}), 2)
        assert _results(resp) == {"a": 0} and resp.throttle_time_ms == 300
        conn.close()


async def test_timeout_ms_answers_request_timed_out_and_changes_nothing_unstarted():
    async with Cluster(brokers=1) as c:
        await c.create_topic("a", 1)
        await c.create_topic("b", 1)
        c.stall_create_partitions(2000)
        conn = await _conn(c)
        resp = await conn.request(_req({"a": 2, "b": 2}, timeout_ms=500), 3)
        assert _results(resp) == {"a": RequestTimedOutError.errno,
                                  "b": RequestTimedOutError.errno}
        await asyncio.sleep(3)
        assert (_count(c, 1, "a"), _count(c, 1, "b")) == (1, 1)
        # timeout_ms <= 0: no deadline
        c.stall_create_partitions(2000)
        assert _results(await conn.request(_req({"a": 2}, timeout_ms=0), 3)) == {"a": 0}
        conn.close()


def test_token_bucket_arithmetic():
    q = ControllerMutationQuota(rate=10.0, window_num=11, window_size_s=1)
    assert q.try_record("x", 100, 0, strict=True) == 0          # 110 -> 10
    assert q.try_record("x", 20, 0, strict=True) == 0           # 10 -> -10
    assert q.try_record("x", 1, 0, strict=True) == 1000         # in debt: 10 tokens at 10/s
    assert q.try_record("x", 1, 1000, strict=True) == 0         # paid back
    assert q.throttle_time_ms("x", 1000) == 100
    assert q.try_record("y", 10**6, 0, strict=False) == 0       # permissive: always done
    assert q.throttle_time_ms("y", 0) > 0
    assert not ControllerMutationQuota(float("inf")).limited("x")


@pytest.mark.real_time
def test_a_stock_admin_client_meets_the_forced_quota_and_backs_off():
    """kafka-python's KafkaAdminClient (CreatePartitions v3) through ThreadedCluster's control API:
    THROTTLING_QUOTA_EXCEEDED raised, the node paused for throttle_time_ms, then it goes through."""
    import time

    from kafka.admin import KafkaAdminClient

    from minibroker.testing.threaded import ThreadedCluster
    with ThreadedCluster(brokers=1) as c:
        c.create_topic("a", 1)
        c.fail_create_partitions("a", ThrottlingQuotaExceededError, throttle_time_ms=300)
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            with pytest.raises(ThrottlingQuotaExceededError):
                admin.create_partitions({"a": 2})
            time.sleep(0.4)
            admin.create_partitions({"a": 2})
            assert c.partition_state("a", 1)["leader"] == 1
            c.set_controller_mutation_rate(0.0)
            admin.create_partitions({"a": 3})       # admitted, bucket in debt
            with pytest.raises(ThrottlingQuotaExceededError):
                admin.create_partitions({"a": 4})
        finally:
            admin.close()


async def test_create_and_delete_topics_count_against_the_same_quota():
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
    CT = CreateTopicsRequest.CreatableTopic

    def create(*names, n=10):
        return CreateTopicsRequest(topics=[CT(name=x, num_partitions=n, replication_factor=1,
                                              assignments=[], configs=[]) for x in names],
                                   timeout_ms=5000, validate_only=False)

    async with Cluster(brokers=1, controller_mutation_rate=1.0) as c:        # burst 11
        conn = await _conn(c)
        resp = await conn.request(create("x", "y", "z"), 6)     # x: 11 -> 1, y: 1 -> -9, z: refused
        assert [(t.name, t.error_code) for t in resp.topics] == [("x", 0), ("y", 0),
                                                                  ("z", THROTTLED)]
        assert 8900 <= resp.throttle_time_ms <= 9000
        resp = await conn.request(create("w", n=1), 5)             # v5: permissive, done
        assert resp.topics[0].error_code == 0 and resp.throttle_time_ms >= 9000
        resp = await conn.request(DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name="x")], timeout_ms=5000), 6)
        assert resp.responses[0].error_code == THROTTLED and "x" in c.brokers[1].metadata.topics
        await asyncio.sleep(10.1)                                    # debt paid back
        resp = await conn.request(DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name="x")], timeout_ms=5000), 6)
        assert resp.responses[0].error_code == 0
        await asyncio.sleep(10)                                      # -9.9 -> 0.1
        # only topics that would be created count: y exists, v goes through (0.1 -> -9.9)
        resp = await conn.request(create("y", "v"), 6)
        assert [(t.name, t.error_code) for t in resp.topics] == [
            ("y", TopicAlreadyExistsError.errno), ("v", 0)]
        assert resp.throttle_time_ms == 0                    # strict: no topic refused
        conn.close()
