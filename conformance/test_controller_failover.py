"""Issue 25 item 6: the controller fails over, and admin calls from real clients go on.

With broker 1 stopped, and then with whichever broker hosts the active controller stopped,
kafka-python's KafkaAdminClient and librdkafka's AdminClient (confluent-kafka) create a topic and
add partitions to it (CreateTopics, CreatePartitions, sent by the clients to the controller that
Metadata names), change its configs (IncrementalAlterConfigs), reassign a partition
(AlterPartitionReassignments, kafka-python) and delete another topic (DeleteTopics); Metadata
(key 3) and DescribeCluster (key 60) name a live broker as the controller. Real clients over
sockets, against an in-process ``ThreadedCluster``; each round uses a new client (a long-lived
one keeps the controller it learnt, see the README).
"""
from __future__ import annotations

import time

import pytest

from conformance.rdlog import LOG

from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.fault, pytest.mark.timeout(150)]

TIMEOUT_S = 30


def _until(fn, what: str, timeout: float = TIMEOUT_S):
    end = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def kafka_python_round(bs: str, topic: str, rf: int) -> tuple[int, int, int]:
    """(partitions after CreatePartitions, Metadata's controller, DescribeCluster's controller)"""
    from kafka import TopicPartition
    from kafka.admin import (ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions,
                             NewTopic)
    admin = KafkaAdminClient(bootstrap_servers=bs, client_id="failover-kafka-python",
                             request_timeout_ms=15000, reconnect_backoff_max_ms=500)
    try:
        admin.create_topics([NewTopic(topic, 2, rf), NewTopic(topic + "-gone", 1, 1)],
                            timeout_ms=TIMEOUT_S * 1000)
        admin.create_partitions({topic: NewPartitions(4)}, timeout_ms=TIMEOUT_S * 1000)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                            configs={"retention.ms": "3600000"})],
                            incremental=True)
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        [entries] = [by_name[topic] for by_name in res.values()]     # {type: {name: configs}}
        assert entries["retention.ms"]["value"] == "3600000", entries["retention.ms"]
        [replicas] = [p["replica_nodes"] for t in admin.describe_topics([topic])
                      for p in t["partitions"] if p["partition_index"] == 0]
        moved = admin.alter_partition_reassignments({TopicPartition(topic, 0): replicas[::-1]})
        assert all(err is None for err in moved.values()), moved
        admin.delete_topics([topic + "-gone"], timeout_ms=TIMEOUT_S * 1000)

        def width():
            [t] = admin.describe_topics([topic])
            return len(t["partitions"]) if t["error_code"] == 0 else 0
        _until(lambda: width() == 4, f"{topic} with 4 partitions")
        metadata = admin._manager.run(admin._get_cluster_metadata, [])   # Metadata (key 3)
        return width(), metadata["controller_id"], admin.describe_cluster()["controller_id"]
    finally:
        admin.close()


def confluent_round(bs: str, topic: str, rf: int) -> tuple[int, int, int]:
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, NewPartitions, NewTopic, ResourceType)
    admin = AdminClient({"bootstrap.servers": bs, "client.id": "failover-confluent",
                         "reconnect.backoff.max.ms": 500, "logger": LOG})
    def done(futures: dict) -> None:
        for f in futures.values():
            f.result(timeout=TIMEOUT_S)
    done(admin.create_topics([NewTopic(topic, 2, rf), NewTopic(topic + "-gone", 1, 1)],
                             operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S))
    done(admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=TIMEOUT_S,
                                 request_timeout=TIMEOUT_S))
    done(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(
            "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])],
        request_timeout=TIMEOUT_S))
    [described] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)],
                                         request_timeout=TIMEOUT_S).values()
    assert described.result(TIMEOUT_S)["retention.ms"].value == "3600000"
    done(admin.delete_topics([topic + "-gone"], operation_timeout=TIMEOUT_S,
                             request_timeout=TIMEOUT_S))

    def width():
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        return len(t.partitions) if t is not None and t.error is None else 0
    _until(lambda: width() == 4, f"{topic} with 4 partitions")
    controller = admin.list_topics(timeout=10).controller_id                   # Metadata
    described = admin.describe_cluster(request_timeout=10).result(TIMEOUT_S)   # DescribeCluster
    return width(), controller, described.controller.id


ROUNDS = {"kafka_python": kafka_python_round, "confluent": confluent_round}


@pytest.mark.parametrize("client", sorted(ROUNDS))
def test_admin_calls_succeed_with_broker_1_and_then_the_controller_host_stopped(client):
    with ThreadedCluster(brokers=3) as tc:
        bootstrap = tc.bootstrap            # every broker, stopped ones too: clients cope
        assert tc.controller_id == 1
        tc.stop_broker(1)
        live = {2, 3}
        assert tc.controller_id in live, "no live broker took over the controller"
        got = ROUNDS[client](bootstrap, f"fo-{client}-a", 2)
        assert got[0] == 4 and got[1] in live and got[2] in live, got
        assert got[1] == got[2] == tc.controller_id

        host = tc.controller_id             # now stop whichever broker hosts the controller
        tc.stop_broker(host)
        live -= {host}
        assert tc.controller_id in live, "no live broker took over the controller"
        got = ROUNDS[client](bootstrap, f"fo-{client}-b", 1)
        assert got[0] == 4 and got[1] in live and got[2] in live, got

        tc.start_broker(1)                  # a voter that comes back may be elected again
        tc.stop_broker(tc.controller_id)
        assert tc.controller_id == 1
        got = ROUNDS[client](bootstrap, f"fo-{client}-c", 1)
        assert got == (4, 1, 1), got
