"""The console's write actions over HTTP against a minibroker cluster: offset reset (dry run, then
applied), KIP-253 deletion with its confirmation, topic deletion with its confirmation; and the
transactions page showing an ongoing transaction and its producer."""
from __future__ import annotations

import asyncio
import html
import re
import time

import httpx
import pytest

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.client.records import TopicPartition
from minibroker.console.server import ThreadedConsole
from minibroker.testing.threaded import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster():
    with ThreadedCluster(brokers=3, group_initial_rebalance_delay_ms=0) as c:
        yield c


@pytest.fixture(scope="module")
def console(cluster):
    with ThreadedConsole(cluster.bootstrap) as con:
        yield con


def post(console, path: str, **data) -> httpx.Response:
    return httpx.post(console.url + path, data=data, timeout=30, follow_redirects=True)


def error(r: httpx.Response) -> str | None:
    found = re.findall(r'id="error">(.*?)</p>', r.text)
    return html.unescape(found[0]) if found else None


async def _commit_offsets(bootstrap: str, topic: str, group: str, n: int) -> dict:
    async with Producer(bootstrap) as p:
        await asyncio.gather(*[p.send(topic, b"x", partition=0) for _ in range(n)])
    c = Consumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                 enable_auto_commit=False)
    c.subscribe([topic])
    got = 0
    for _ in range(60):
        got += len(await c.poll(0.5))
        if got >= n:
            break
    await c.commit()
    await c.close()
    async with Admin(bootstrap) as a:
        return await a.list_group_offsets(group)


async def _offsets(bootstrap: str, group: str) -> dict:
    async with Admin(bootstrap) as a:
        return await a.list_group_offsets(group)


def test_reset_offsets_dry_run_then_applied(console, cluster):
    cluster.create_topic("resettable", partitions=1)
    before = asyncio.run(_commit_offsets(cluster.bootstrap, "resettable", "resetters", 10))
    assert before == {TopicPartition("resettable", 0): 10}
    r = post(console, "/groups/resetters/reset", topic="", strategy="earliest", value="",
             apply="0")
    assert r.status_code == 200 and "Dry run: nothing was committed." in r.text
    assert re.search(r"<td>resettable</td><td>0</td><td>10</td><td>0</td>", r.text)
    assert asyncio.run(_offsets(cluster.bootstrap, "resetters")) == before
    r = post(console, "/groups/resetters/reset", topic="resettable", strategy="shift",
             value="-3", apply="1")
    assert r.status_code == 200 and "Committed." in r.text, error(r)
    assert asyncio.run(_offsets(cluster.bootstrap, "resetters")) == {
        TopicPartition("resettable", 0): 7}
    r = post(console, "/groups/resetters/reset", topic="", strategy="sideways", value="",
             apply="0")
    assert r.status_code == 400 and "unknown reset strategy" in error(r)
    r = httpx.get(console.url + "/groups/nobody-here", timeout=30)
    assert r.status_code == 404 and "no group 'nobody-here'" in error(r)


def test_kip253_deletion_needs_its_confirmation(console, cluster):
    cluster.create_topic("shrinking", partitions=4, replication_factor=2)
    r = post(console, "/topics/shrinking/partitions", count="6")
    assert r.status_code == 200 and "partitions 4-5 added" in r.text, error(r)
    for p in (4, 5):                    # not drained, so the controller keeps them for now
        r = post(console, "/topics/shrinking/messages", partition=str(p), key="", value="x")
        assert f"produced to shrinking-{p}" in r.text, error(r)
    r = post(console, "/topics/shrinking/partitions", count="3", confirm_delete="on")
    assert r.status_code == 400 and "cannot shrink below" in error(r)      # KIP-253: initial 4
    r = post(console, "/topics/shrinking/partitions", count="4")
    assert r.status_code == 400 and "marks partitions 4-5 for deletion" in error(r)
    r = post(console, "/topics/shrinking/partitions", count="4", confirm_delete="on")
    assert r.status_code == 200 and "partitions 4-5 marked for deletion" in r.text, error(r)
    assert "marked partitions drained" in r.text            # a step of the deletion
    assert len(re.findall(r'<tr class="marked-for-deletion">', r.text)) == 2
    assert r.text.count("<td>not drained</td>") == 2
    r = post(console, "/topics/shrinking/partitions", count="many")
    assert r.status_code == 400 and "invalid partition count" in error(r)


def test_topic_deletion_needs_its_name_typed(console, cluster):
    cluster.create_topic("doomed", partitions=1)
    r = httpx.post(console.url + "/topics/doomed/delete", data={"confirm": "doomed"},
                   headers={"Origin": "http://evil.example"}, timeout=30)
    assert r.status_code == 403 and "refused: a form posted from http://evil.example" in r.text
    assert httpx.get(console.url + "/topics/doomed", timeout=30).status_code == 200
    r = post(console, "/topics/doomed/delete", confirm="doom")
    assert r.status_code == 400 and "type the topic's name (doomed)" in error(r)
    r = post(console, "/topics/doomed/delete", confirm="doomed")
    assert r.status_code == 200 and "topic doomed deleted" in r.text
    assert httpx.get(console.url + "/topics/doomed", timeout=30).status_code == 404


async def _open_transaction(bootstrap: str, topic: str) -> Producer:
    p = Producer(bootstrap, transactional_id="console-txn")
    await p.start()
    await p.init_transactions()
    p.begin_transaction()
    await p.send(topic, b"in a transaction", partition=0)
    return p


def test_transactions_page_shows_an_ongoing_transaction_and_its_producer(console, cluster):
    cluster.create_topic("txn-topic", partitions=1)
    loop = asyncio.new_event_loop()
    try:
        p = loop.run_until_complete(_open_transaction(cluster.bootstrap, "txn-topic"))
        r = httpx.get(console.url + "/transactions", timeout=30)
        assert r.status_code == 200 and error(r) is None
        row = re.search(r"<tr><td>console-txn</td>(.*?)</tr>", r.text, re.S)
        assert row and "Ongoing" in row.group(1) and "txn-topic-0" in row.group(1), r.text
        assert re.search(r'<table id="producers">.*<td>txn-topic</td><td>0</td>', r.text, re.S)
        loop.run_until_complete(p.abort_transaction())
        loop.run_until_complete(p.stop())
    finally:
        loop.close()


def test_the_cluster_page_shows_armed_faults(console, cluster):
    r = httpx.get(console.url + "/cluster", timeout=30)
    assert "Fault control is off" in r.text
    cluster.cluster.enable_fault_admin()
    cluster.set_latency(3, 20)
    try:
        r = httpx.get(console.url + "/cluster", timeout=30)
        assert r.status_code == 200 and "faults armed" in r.text, r.text
        assert "latency" in r.text
    finally:
        cluster.clear_faults()
    r = httpx.get(console.url + "/cluster", timeout=30)
    assert "No fault armed." in r.text


async def _reassign(bootstrap: str, topic: str) -> int:
    async with Producer(bootstrap) as p:
        await asyncio.gather(*[p.send(topic, b"x" * 100, partition=0) for _ in range(50)])
    async with Admin(bootstrap) as a:
        await a.metadata.refresh([topic])
        now = a.metadata.topic(topic).partitions[0].replicas
        target = [b for b in (1, 2, 3) if b not in now][:1] + list(now)[:1]
        rid, _ = await a.assign_partitions({TopicPartition(topic, 0): target})
        return rid


def test_a_reassignment_shows_its_progress_per_replica(console, cluster):
    cluster.create_topic("moving", partitions=1, replication_factor=1)
    rid = asyncio.run(_reassign(cluster.bootstrap, "moving"))
    r = httpx.get(console.url + "/changes", timeout=30)
    assert r.status_code == 200 and error(r) is None
    assert f"<p>Request {rid}</p>" in r.text
    rows = re.findall(r"<tr><td>moving</td><td>0</td><td>(\d)</td>", r.text)
    assert len(rows) == 2, r.text


def test_a_kip848_group_shows_its_epochs(console, cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster.create_topic("next-gen", partitions=2)
    c = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kip848",
                                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                  "log_level": 3})
    try:
        c.subscribe(["next-gen"])
        for _ in range(60):
            c.poll(0.5)
            if c.assignment():
                break
        assert c.assignment()
        c.commit(offsets=[confluent_kafka.TopicPartition("next-gen", 0, 0)], asynchronous=False)
        r = httpx.get(console.url + "/groups/kip848", timeout=30)
        assert r.status_code == 200 and error(r) is None, r.text
        assert '<span class="tag">consumer</span>' in r.text
        assert re.search(r"group_epoch \d+ · assignment_epoch \d+", r.text)
        assert "<th>member_epoch</th>" in r.text and "next-gen: 0,1" in r.text
    finally:
        c.close()


async def _produce_at(bootstrap: str, topic: str, stamps: list[int]) -> None:
    async with Producer(bootstrap) as p:
        for i, ts in enumerate(stamps):
            await p.send(topic, b'{"n": %d, "ok": true}' % i, key=b"key-%d" % i, partition=0,
                         timestamp_ms=ts, headers=[("trace", b"t%d" % i)])


def test_messages_from_a_timestamp_as_json(console, cluster):
    cluster.create_topic("stamped", partitions=1)
    base = 1_700_000_000_000
    asyncio.run(_produce_at(cluster.bootstrap, "stamped", [base + 1000 * i for i in range(5)]))
    r = httpx.get(console.url + "/topics/stamped/messages",
                  params={"partition": "0", "timestamp": str(base + 2500), "format": "json"},
                  timeout=30)
    assert r.status_code == 200 and error(r) is None
    offsets = re.findall(r'<tr data-offset="(\d+)">', r.text)
    assert offsets == ["3", "4"]                               # the first at or after 2.5 s
    assert '{\n  "n": 3,\n  "ok": true\n}' in html.unescape(r.text)      # pretty JSON
    assert "trace=t3" in r.text
    r = httpx.get(console.url + "/topics/stamped/messages",
                  params={"partition": "0", "offset": "1", "limit": "2"}, timeout=30)
    assert re.findall(r'<tr data-offset="(\d+)">', r.text) == ["1", "2"]
    r = httpx.get(console.url + "/topics/stamped/messages", params={"partition": "7"}, timeout=30)
    assert r.status_code == 400 and "stamped has no partition 7" in error(r)


async def _many_topics(bootstrap: str, n: int) -> None:
    async with Admin(bootstrap) as a:
        await a.create_topics([(f"bulk-{i:03d}", 1, 1) for i in range(n)])


def test_topics_are_listed_200_a_page_and_filtered(console, cluster):
    asyncio.run(_many_topics(cluster.bootstrap, 205))
    # The console shares every topic's Metadata for up to a second or two (docs/console.md):
    # the new topics appear within that.
    for _ in range(50):
        r = httpx.get(console.url + "/topics", params={"q": "bulk-"}, timeout=30)
        if "205 topics matching" in html.unescape(r.text):
            break
        time.sleep(0.2)
    assert r.status_code == 200 and "205 topics matching" in html.unescape(r.text)
    names = re.findall(r'<a href="/topics/(bulk-\d+)">', r.text)
    assert names == [f"bulk-{i:03d}" for i in range(200)]
    assert 'href="?q=bulk-&amp;page=2"' in r.text
    r = httpx.get(console.url + "/topics", params={"q": "bulk-", "page": "2"}, timeout=30)
    assert re.findall(r'<a href="/topics/(bulk-\d+)">', r.text) == [
        f"bulk-{i:03d}" for i in range(200, 205)]
    r = httpx.get(console.url + "/topics", params={"q": "bulk-20"}, timeout=30)
    assert len(re.findall(r'<a href="/topics/(bulk-\d+)">', r.text)) == 5     # 200-204
