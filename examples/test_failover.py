"""A client's test suite using minibroker's pytest plugin (installed with the package):

    pytest examples/test_failover.py

`minibroker_fresh_cluster` is a new 3-broker cluster for this test alone; its control API
(create_topic, leader_of, stop_broker, start_broker) is synchronous.
"""
from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def test_acknowledged_records_survive_the_leader_stopping(minibroker_fresh_cluster):
    cluster = minibroker_fresh_cluster
    cluster.create_topic("payments", partitions=1, replication_factor=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=20,
                             retry_backoff_ms=100)
    for i in range(50):
        producer.send("payments", b"%d" % i).get(timeout=30)

    old_leader = cluster.leader_of("payments", 0)
    cluster.stop_broker(old_leader)                  # a follower in the ISR takes over
    for i in range(50, 100):
        producer.send("payments", b"%d" % i).get(timeout=30)
    producer.close()
    assert cluster.leader_of("payments", 0) != old_leader

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("payments", 0)])
    values = []
    for record in consumer:
        values.append(int(record.value))
        if len(values) == 100:
            break
    consumer.close()
    assert values == list(range(100))                # every acknowledged write, in order
    cluster.start_broker(old_leader)
