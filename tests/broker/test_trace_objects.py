"""The trace summarises responses from the handlers' own objects (broker/trace.py), Fetch's from
its encoder's arguments: what it writes must be what decoding the bytes sent would give, for
every API a real client's session uses and every Fetch version; and an answer a handler serves
from its cache is not summarised stale."""
from __future__ import annotations

import json
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.protocol.metadata import MetadataRequest

from cluster_helpers import connect
from minibroker.broker import trace
from minibroker.broker.dispatch import RawResponse
from minibroker.broker.trace_json import fetch_json, fields_json
from minibroker.cluster import Cluster
from minibroker.log.batch import build_batch
from minibroker.network.client import decode_response
from minibroker.protocol.fast import FetchPartition, NodeEndpoint, encode_fetch_response
from minibroker.protocol.messages import FetchRequestKip253
from minibroker.testing.threaded import ThreadedCluster


def _compare_with_wire(monkeypatch) -> tuple[list, list]:
    """Makes the tracer also decode every response it summarised from a handler's object and
    compare both; returns the (API, version) pairs checked and the differences."""
    checked, differ = [], []
    summarise = trace.Tracer._summarise

    def both(ex, handler, key, version, parts, out):
        resp, text = summarise(ex, handler, key, version, parts, out)
        if ex.resp is not None and ex.resp is not trace._UNSEEN and (
                type(ex.resp) is not RawResponse or ex.resp.source is not None):
            wire = decode_response(trace.response_class(handler.request_class),
                                   memoryview(b"".join(parts))[4:], version)
            shown = version if key != 18 or wire.error_code == 0 else 0
            ours, theirs = json.loads(text), json.loads(fields_json(wire, shown, set()))
            if ours != theirs:
                differ.append((handler.name, version, ours, theirs))
            checked.append((handler.name, version))
        return resp, text
    monkeypatch.setattr(trace.Tracer, "_summarise", staticmethod(both))
    return checked, differ


def test_handler_objects_read_as_the_bytes_sent(tmp_path, monkeypatch):
    checked, differ = _compare_with_wire(monkeypatch)
    path = tmp_path / "trace.jsonl"
    with ThreadedCluster(brokers=1, trace=str(path), group_initial_rebalance_delay_ms=0) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, client_id="objects")
        admin.create_topics([NewTopic("o", 2, 1)])
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "o")])
        producer = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all")
        for i in range(4):
            producer.send("o", b"v%d" % i, partition=i % 2)
        producer.flush(30)
        consumer = KafkaConsumer("o", bootstrap_servers=c.bootstrap, group_id="g",
                                 auto_offset_reset="earliest", consumer_timeout_ms=3000,
                                 enable_auto_commit=False)
        assert len(list(consumer)) == 4
        consumer.commit()
        consumer.close()
        admin.list_groups()
        admin.describe_groups(["g"])
        admin.list_group_offsets("g")
        admin.describe_cluster()
        admin.describe_log_dirs()
        admin.delete_topics(["o"])
        admin.close()
        producer.close()
    assert differ == []
    apis = {name for name, _ in checked}
    assert {"Fetch", "FindCoordinator", "JoinGroup", "SyncGroup", "OffsetCommit", "OffsetFetch",
            "CreateTopics", "DescribeConfigs", "DescribeGroups", "ListGroups",
            "DescribeCluster", "DescribeLogDirs", "DeleteTopics"} <= apis, apis
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert not [r for r in lines if "undecodable" in r]


async def test_a_cached_answer_that_changed_is_traced_anew(tmp_path):
    path = tmp_path / "trace.jsonl"
    async with Cluster(brokers=1, trace=str(path)) as c:
        await c.create_topic("first", 1, 1)
        conn = await connect(c, 1, client_id="cached")
        for _ in range(2):
            await conn.request(MetadataRequest(topics=None), 1)
        await c.create_topic("second", 1, 1)
        await conn.request(MetadataRequest(topics=None), 1)
        conn.close()
    answers = [r["fields"] for r in map(json.loads, path.read_text().splitlines())
               if r.get("client_id") == "cached" and r["dir"] == "response"]
    names = [sorted(t["name"] for t in a["topics"]) for a in answers]
    assert names == [["first"], ["first"], ["first", "second"]]
    assert answers[0] == answers[1]


def _fetch_answers(version: int):
    """Fetch answers' encoder arguments: every field set, batches whole, split across
    buffers, cut short (a fetch may end in part of one), legacy magic and null records."""
    one = bytes(build_batch([(None, b"x" * 10, [])], timestamp=1))
    legacy = b"\0" * 16 + b"\x01" + b"\0" * 20          # a magic 1 header
    sets = [None, [], [memoryview(one)], [memoryview(one), one], [memoryview(one + one[:30])],
            [memoryview(one + one[:10])], [memoryview(one[:40]), memoryview(one[40:] + one)],
            [legacy]]
    name = uuid.UUID(int=5) if version >= 13 else 't\u00e9"'
    for records in sets:
        for endpoints in ([], [NodeEndpoint(1, "h", 9, None), NodeEndpoint(2, "h\u00e9", 9, "r")]):
            part = FetchPartition(0, 0, 5, 4, 1, records, (1, 2) if version >= 12 else None,
                                  [(3, 4)], 2, (1, 7) if version >= 12 else None)
            topics = [(name, [part, FetchPartition(1, 6, -1, -1, -1, None)])]
            yield (0, 3 if version >= 7 else 0, 7 if version >= 7 else 0, topics, endpoints)


def test_a_fetch_answer_reads_as_its_bytes_at_every_version():
    response = trace.response_class(FetchRequestKip253)
    compared = 0
    for version in range(4, 18):
        for source in _fetch_answers(version):
            parts = encode_fetch_response(version, 9, *source)
            wire = decode_response(response, memoryview(b"".join(parts))[4:], version)
            ours, theirs = set(), set()
            assert fetch_json(version, source, ours) == fields_json(wire, version, theirs)
            assert ours == theirs == ({3, 6} if version >= 7 else {6})
            compared += 1
    assert compared == 14 * 16
