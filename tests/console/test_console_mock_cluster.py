"""The console against another broker: librdkafka's mock cluster (confluent-kafka with
test.mock.num.brokers, in this process, listening on 127.0.0.1). The same pages render, minus
the minibroker-only panels, and what the mock does not implement is said on the page."""
from __future__ import annotations

import re

import httpx
import pytest

from minibroker.console.server import ThreadedConsole

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(120)]

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def mock_cluster():
    """(bootstrap, the client that owns the mock cluster): it lives as long as that client."""
    owner = confluent_kafka.Producer({"test.mock.num.brokers": 3, "bootstrap.servers": "",
                                      "log_level": 3})
    for i in range(5):
        owner.produce("mock-orders", key=f"k{i}".encode(), value=f"order {i}".encode(),
                      partition=0)
    assert owner.flush(30) == 0
    brokers = owner.list_topics(timeout=10).brokers
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in sorted(brokers.values(),
                                                                 key=lambda b: b.id))
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "mock-readers",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "log_level": 3})
    c.commit(offsets=[confluent_kafka.TopicPartition("mock-orders", 0, 2)], asynchronous=False)
    c.close()
    yield bootstrap, owner


@pytest.fixture(scope="module")
def console(mock_cluster):
    with ThreadedConsole(mock_cluster[0], properties={"request.timeout.ms": "5000"}) as con:
        yield con


def get(console, path: str) -> httpx.Response:
    r = httpx.get(console.url + path, timeout=30)
    assert "Traceback" not in r.text and "the console failed" not in r.text, r.text
    return r


def error(r: httpx.Response) -> str | None:
    found = re.findall(r'id="error">(.*?)</p>', r.text)
    return found[0] if found else None


def test_the_cluster_page_shows_the_mock_brokers_without_minibroker_panels(console, mock_cluster):
    r = get(console, "/cluster")
    assert r.status_code == 200 and error(r) is None
    for hostport in mock_cluster[0].split(","):
        assert f"<td>{hostport.rpartition(':')[2]}</td>" in r.text
    assert "Kafka broker" in r.text and ">minibroker<" not in r.text
    assert "Faults" not in r.text


def test_topics_partitions_and_messages_render(console):
    r = get(console, "/topics")
    assert r.status_code == 200 and "mock-orders" in r.text
    r = get(console, "/topics/mock-orders")
    assert r.status_code == 200 and error(r) is None
    row = re.search(r"<tr><td>0</td>(.*?)</tr>", r.text, re.S).group(1)
    assert "<td>5</td>" in row                                # high_watermark and messages
    assert "DescribeConfigs is not supported" in r.text
    r = get(console, "/topics/mock-orders/messages?partition=0&key=k3")
    assert r.status_code == 200 and "order 3" in r.text and "order 2" not in r.text


def test_a_message_produced_through_the_console_is_read_back(console):
    r = httpx.post(console.url + "/topics/mock-orders/messages",
                   data={"partition": "0", "key": "from-console", "value": "hello mock"},
                   timeout=30, follow_redirects=True)
    assert r.status_code == 200 and "produced to mock-orders-0 at offset 5" in r.text, r.text
    assert "hello mock" in r.text


def test_groups_changes_and_transactions_render_what_the_mock_answers(console):
    r = get(console, "/groups")
    assert r.status_code == 200 and "The brokers list no groups" in r.text
    r = get(console, "/groups/mock-readers")
    assert r.status_code == 200 and error(r) is None
    assert re.search(r"<td>mock-orders</td><td>0</td><td>2</td><td>\d+</td><td>\d+</td>", r.text)
    r = get(console, "/changes/mock-orders")
    assert r.status_code == 200 and error(r) is None
    assert 'id="steps"' not in r.text and "not minibroker" in r.text
    r = get(console, "/transactions")
    assert r.status_code == 200 and "do not answer ListTransactions" in r.text
    r = get(console, "/topics/not-there")
    assert r.status_code == 404 and "no topic" in error(r)
