"""`serve --data-dir` killed with SIGKILL while a real client (kafka-python) produces with
acks=all, then started again on the same directory: every acknowledged record, the topic, its
KIP-253 state and a group's committed offset are back; garbage appended to the segments (a torn
write) is cut off at the last whole batch."""
from __future__ import annotations

import asyncio
import glob
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.protocol.metadata import MetadataRequest
from kafka.structs import OffsetAndMetadata

from minibroker.log.segments import read_file, scan
from minibroker.network.client import KafkaClientConnection
from minibroker.protocol.messages import MetadataResponseKip253

TOPIC = "k"
MIN_ACKED = 150                 # records acknowledged before the kill (the producer goes on)
MAX_RECORDS = 5000              # the producing loop's bound


def serve_on(data_dir: str, log_path: str) -> tuple[str, subprocess.Popen]:
    with open(log_path, "a") as err:
        p = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "3",
                              "--port", "0", "--data-dir", data_dir,
                              "--override", "group.initial.rebalance.delay.ms=0"],
                             stdout=subprocess.PIPE, stderr=err, text=True,
                             start_new_session=True)
    line = p.stdout.readline()
    assert line.startswith("BOOTSTRAP "), line + open(log_path).read()
    return line.split()[1], p


def kip253_state(bootstrap: str) -> tuple:
    async def fetch():
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        conn = await KafkaClientConnection.connect(host, int(port))
        try:
            resp = await conn.request(MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False), 12,
                response_class=MetadataResponseKip253)
        finally:
            conn.close()
        [t] = resp.topics
        return (t.topic_id, len(t.partitions), t.initial_partition_count,
                t.undeleted_partition_count)
    return asyncio.run(fetch())


def produce_until_killed(bootstrap: str, acked: list, stop: threading.Event) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2,
                             retries=0, request_timeout_ms=2000, max_block_ms=3000,
                             delivery_timeout_ms=3000)
    try:
        for i in range(MAX_RECORDS):
            if stop.is_set():
                break
            value = b"r%d" % i
            future = producer.send(TOPIC, value, partition=i % 2)
            future.add_callback(lambda md, v=value: acked.append((md.partition, md.offset, v)))
            if i % 20 == 19:
                time.sleep(0.005)       # let acks come back while the loop goes on
    except Exception:  # noqa: BLE001 — the broker is gone: every ack was already counted
        pass
    finally:
        producer.close(timeout=20)     # what was in flight expires (delivery.timeout.ms)


def read_back(bootstrap: str, partitions: list[int]) -> dict[tuple[int, int], bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10000)
    tps = [TopicPartition(TOPIC, p) for p in partitions]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    out = {}
    deadline = time.monotonic() + 60
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for records in consumer.poll(1000).values():
            for r in records:
                out[(r.partition, r.offset)] = r.value
    consumer.close()
    return out


@pytest.mark.timeout(240)      # ~25 s on a quiet machine; two serve starts and a real client
def test_sigkill_during_acks_all_production_then_restart_keeps_everything(tmp_path):
    data, log_path = str(tmp_path / "data"), str(tmp_path / "serve.log")
    bootstrap, p = serve_on(data, log_path)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
        admin.create_partitions({TOPIC: 3})       # int: kafka-python 3.0.9 breaks on NewPartitions(n)
        first = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        first.send(TOPIC, b"in 2", partition=2).get(30)        # so partition 2 is not drained
        first.close()
        admin.create_partitions({TOPIC: 2})      # KIP-253: 2 is being deleted
        admin.close()
        group = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
        group.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(3, "m", -1)})
        group.close()
        state = kip253_state(bootstrap)
        assert state[1:] == (3, 1, 2), state
        acked: list = []
        stop = threading.Event()
        producing = threading.Thread(target=produce_until_killed, args=(bootstrap, acked, stop))
        producing.start()
        deadline = time.monotonic() + 60
        while len(acked) < MIN_ACKED and time.monotonic() < deadline and producing.is_alive():
            time.sleep(0.01)
        assert len(acked) >= MIN_ACKED, open(log_path).read()[-3000:]
        os.killpg(p.pid, signal.SIGKILL)        # mid-production
        p.wait(10)
        stop.set()
        producing.join(30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
    # A torn write on every replica of partition 0: garbage after the last whole batch.
    torn = {}
    for path in glob.glob(os.path.join(data, "broker-*", f"{TOPIC}-0", "*.log")):
        torn[path] = os.path.getsize(path)
        with open(path, "ab") as f:
            f.write(b"\x00\x00\x00\x00\x00\x00\x01\x00" + os.urandom(200))
    assert len(torn) == 3

    bootstrap, p = serve_on(data, log_path)
    try:
        assert kip253_state(bootstrap) == state
        back = read_back(bootstrap, [0, 1, 2])
        assert back[(2, 0)] == b"in 2"
        lost = [(part, off, v) for part, off, v in acked if back.get((part, off)) != v]
        print(f"{len(acked)} records acknowledged before SIGKILL, {len(back)} read back, "
              f"{len(lost)} acknowledged records lost")
        assert not lost
        group = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
        assert group.committed(TopicPartition(TOPIC, 0)) == 3
        group.close()
        # The garbage was cut: every replica's segment is whole, valid batches to its end. Its
        # size may differ from before the torn write: a follower then truncates a tail past the
        # new leader's (never acknowledged) or fetches what it lacked, as Kafka's followers do.
        for path in torn:
            recovered = scan(read_file(path), 0, verify_crc=True)
            assert recovered.problem is None and recovered.headers, (path, recovered.problem)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(30) == 0
