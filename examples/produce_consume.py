"""Produce and consume with kafka-python against `minibroker serve`.

    minibroker serve                                  # prints BOOTSTRAP 127.0.0.1:9092,...
    python examples/produce_consume.py 127.0.0.1:9092

Creates the topic "example-orders" (3 partitions, a replica on every broker) if it is missing,
produces 10 keyed records with acks=all, and reads them back in a consumer group, which commits:
run it again and the group reads only the 10 new records.
"""
from __future__ import annotations

import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

TOPIC = "example-orders"
COUNT = 10


def main(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    if TOPIC not in admin.list_topics():
        brokers = len(admin.describe_cluster()["brokers"])
        admin.create_topics([NewTopic(TOPIC, 3, min(3, brokers))])
    admin.close()

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(COUNT):
        producer.send(TOPIC, key=b"customer-%d" % (i % 3), value=b"order %d" % i)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="example-readers",
                             auto_offset_reset="earliest", consumer_timeout_ms=15000)
    read = 0
    for record in consumer:
        print(f"partition {record.partition} offset {record.offset}: "
              f"{record.key.decode()} {record.value.decode()}")
        read += 1
        if read == COUNT:
            break
    consumer.commit()
    consumer.close()
    print(f"read {read} records")
    if read != COUNT:
        sys.exit(f"expected {COUNT} records")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092")
