"""`serve` past its log memory cap keeps every acknowledged record (issue 42): librdkafka's tests
0038/0041 and a Spark benchmark lost their oldest records when the cap deleted them. Here a
3-broker serve with a 2 MiB cap per broker takes 8x that (RF 3, acks=all) from confluent-kafka,
and a consumer reading from the beginning gets every record, in order; the oldest were read back
from the spill files, which sit in a temporary directory that is gone once serve stopped.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]

CAP = 2 << 20
RECORD = 8 << 10
COUNT = 8 * CAP // RECORD           # 16 MiB: 8x the cap


def _spill_dirs(tmp: str) -> list[str]:
    return sorted(d for d in os.listdir(tmp) if d.startswith("minibroker-spill-"))


def _files_under(path: str) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def test_produce_many_times_the_cap_then_consume_everything_from_the_beginning(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "3",
                          "--port", "0", "--override", f"log.memory.max.bytes={CAP}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("BOOTSTRAP "), line
        bootstrap = line.split()[1]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        [fut] = admin.create_topics([NewTopic("spill", 1, 3)]).values()
        fut.result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                             "enable.idempotence": True, "linger.ms": 5})
        acked = []

        def on_delivery(err, msg):
            if err is None:
                acked.append(int(msg.key()))
        for i in range(COUNT):
            value = b"%08d" % i + bytes([i % 251]) * (RECORD - 8)
            while True:
                try:
                    producer.produce("spill", key=b"%d" % i, value=value,
                                     on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        assert producer.flush(60) == 0
        assert acked == list(range(COUNT))
        [spill] = [os.path.join(tmp_path, d) for d in _spill_dirs(str(tmp_path))][:1] or [None]
        assert spill is not None and _files_under(spill) > 0, "nothing was spilled"

        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                                             "auto.offset.reset": "earliest",
                                             "enable.auto.commit": False})
        consumer.subscribe(["spill"])
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 90
        while len(got) < COUNT and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None or msg.error():
                continue
            i = int(msg.value()[:8])
            assert msg.value() == b"%08d" % i + bytes([i % 251]) * (RECORD - 8)
            got.append((msg.offset(), i))
        consumer.close()
        assert got == [(i, i) for i in range(COUNT)]
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(30) == 0, p.stderr.read()
    assert _spill_dirs(str(tmp_path)) == []
