"""The protocol trace (Cluster(trace=FILE), serve --trace) and `minibroker trace FILE`."""
from __future__ import annotations

import asyncio
import json
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from cluster_helpers import connect, fetch_request, produce_request
from minibroker.broker.dispatch import dispatch
from minibroker.cli import main as cli_main
from minibroker.cluster import Cluster
from minibroker.log.batch import build_batch

SECRET = b"the-record-value-never-traced"


def lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


async def _scenario(c: Cluster) -> None:
    conn = await connect(c, 1, client_id="tracer-test")
    await conn.request(ApiVersionsRequest(client_software_name="test-client",
                                          client_software_version="9.9"), 3)
    await conn.request(MetadataRequest(topics=None), 1)
    records = bytes(build_batch([(b"k", SECRET, [])] * 3, producer_id=7, producer_epoch=1,
                                base_sequence=0, compression=1))
    resp = await conn.request(produce_request("t", 0, records), 9)
    assert resp.responses[0].partition_responses[0].error_code == 0
    await conn.request(fetch_request("t", 0, 0), 12)
    conn.close()


async def test_every_request_and_response_is_a_line(tmp_path):
    path = tmp_path / "trace.jsonl"
    async with Cluster(brokers=1, trace=str(path), seed=1) as c:
        await c.create_topic("t", 1, 1)
        await _scenario(c)
    got = [r for r in lines(path) if r.get("client_id") == "tracer-test"]
    assert [(r["dir"], r["api"]) for r in got] == [
        ("request", "ApiVersions"), ("response", "ApiVersions"), ("request", "Metadata"),
        ("response", "Metadata"), ("request", "Produce"), ("response", "Produce"),
        ("request", "Fetch"), ("response", "Fetch")]
    assert len({r["conn"] for r in got}) == 1
    assert [r["corr"] for r in got] == [1, 1, 2, 2, 3, 3, 4, 4]
    produce = got[4]
    assert produce["software"] == "test-client/9.9" and produce["version"] == 9
    [batch] = produce["fields"]["topic_data"][0]["partition_data"][0]["records"]
    assert batch | {"size": 0} == {"base_offset": 0, "count": 3, "producer_id": 7,
                                   "producer_epoch": 1, "base_sequence": 0, "codec": "gzip",
                                   "transactional": False, "control": False, "size": 0}
    fetched = got[7]["fields"]["responses"][0]["partitions"][0]["records"]
    assert [b["count"] for b in fetched] == [3] and fetched[0]["size"] == batch["size"]
    assert got[7]["latency_ms"] >= 0 and "errors" not in got[7]
    assert SECRET.hex() not in path.read_text() and SECRET.decode() not in path.read_text()
    # The cluster clock stamps the lines (seeded: its wall-clock base).
    assert got[0]["time"] <= got[-1]["time"] and got[0]["time"] > 10**12


async def test_errors_no_response_and_a_closed_connection(tmp_path):
    path = tmp_path / "trace.jsonl"
    async with Cluster(brokers=1, trace=str(path)) as c:
        await c.create_topic("t", 1, 1)
        conn = await connect(c, 1, client_id="errs")
        await conn.request(produce_request("nope-" * 50, 0, None), 9)       # invalid topic
        conn.send(produce_request("t", 0, bytes(build_batch([(None, b"v", [])])), acks=0), 9)
        await conn.request(MetadataRequest(topics=None), 1)
        conn.close()
        b = c.brokers[1]
        reader, writer = await asyncio.open_connection(b.host, b.port)
        writer.write(struct.pack(">ihhih", 10, 3, 1, 5, 2) + b"x")           # truncated header
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    got = lines(path)
    errs = [r for r in got if r.get("client_id") == "errs" and r["dir"] == "response"]
    assert errs[0]["api"] == "Produce" and list(errs[0]["errors"]) in (
        ["INVALID_TOPIC_EXCEPTION"], ["UNKNOWN_TOPIC_OR_PARTITION"])
    assert errs[1].get("no_response") is True
    assert [r["dir"] for r in got if r.get("corr") == 5 and r.get("api") == "Metadata"][-1] == \
        "closed"


async def test_off_means_dispatch_itself():
    async with Cluster(brokers=1) as c:
        b = c.brokers[1]
        assert b.services.tracer is None and b.handle.func is dispatch


async def test_trace_command_filters(tmp_path, capsys):
    path = tmp_path / "trace.jsonl"
    async with Cluster(brokers=1, trace=str(path)) as c:
        await c.create_topic("t", 1, 1)
        await _scenario(c)
        conn = await connect(c, 1, client_id="other")
        await conn.request(produce_request("nope-" * 50, 0, None), 9)
        conn.close()
    cli_main(["trace", str(path), "--api", "Produce", "--client", "test-client"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[3:6] for line in out if "#" in line] == [
        ["→", "Produce", "v9"], ["←", "Produce", "v9"]]
    assert "t[0] @0 n=3 pid=7 e=1 seq=0 gzip" in "\n".join(out)
    cli_main(["trace", str(path), "--error"])
    out = capsys.readouterr().out
    assert "other" in out and "tracer-test" not in out and "errors=" in out
    cli_main(["trace", str(path), "--topic", "t", "--api", "Fetch"])
    out = capsys.readouterr().out.splitlines()
    assert len([x for x in out if "Fetch" in x]) == 2


def test_serve_refuses_trace_with_processes():
    with pytest.raises(SystemExit, match="not with --processes"):
        cli_main(["serve", "--processes", "--trace", "-", "--port", "0"])


async def test_a_trace_file_is_written_on_a_timer_and_when_flushed(tmp_path):
    # A write and a flush per loop turn were most of a traced Metadata's cost: lines are gathered
    # for trace.FLUSH_S (or FLUSH_BYTES), and flush() writes them at once (the pytest plugin's
    # failing-test report reads the file while the cluster runs).
    from minibroker.broker import trace
    path = tmp_path / "trace.jsonl"
    async with Cluster(brokers=1, trace=str(path), seed=1) as c:
        conn = await connect(c, 1, client_id="timer")
        await conn.request(MetadataRequest(topics=None), 1)
        await asyncio.sleep(trace.FLUSH_S + 0.2)
        written = lines(path)
        assert [x["dir"] for x in written][-2:] == ["request", "response"]
        await conn.request(MetadataRequest(topics=None), 1)
        assert len(lines(path)) == len(written)             # gathered, not yet written
        c.tracer.flush()
        assert len(lines(path)) == len(written) + 2
        many = trace.FLUSH_BYTES // 200 + 10                # a Metadata pair is over 200 bytes
        await asyncio.gather(*(conn.request(MetadataRequest(topics=None), 1)
                               for _ in range(many)))
        assert len(lines(path)) > len(written) + 2          # past FLUSH_BYTES: written at once
        conn.close()
