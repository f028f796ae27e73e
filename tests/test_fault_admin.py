"""FaultControl (key 1004) over real sockets, on virtual time: off unless the cluster enables it
(`serve --faults`), each command applied to the cluster, one-line INVALID_REQUEST messages for
bad arguments, and never itself subject to the faults it arms."""
from __future__ import annotations

import json

import pytest
from kafka.errors import ClusterAuthorizationFailedError, InvalidRequestError
from kafka.protocol.api_key import ApiKey

from cluster_helpers import connect, wait_until
from minibroker.broker.faults import DISCONNECT
from minibroker.cluster import Cluster
from minibroker.protocol.messages import FaultControlRequest
from minibroker.testing.threaded import ThreadedCluster


def command(name: str, broker_id=-1, api_key=-1, errors=(), count=-1, ms=-1, side_a=(),
            side_b=()) -> FaultControlRequest:
    return FaultControlRequest(command=name, broker_id=broker_id, api_key=api_key,
                               errors=list(errors), count=count, ms=ms, side_a=list(side_a),
                               side_b=list(side_b))


async def send(c: Cluster, req: FaultControlRequest, via: int = 1):
    conn = await connect(c, via)
    try:
        return await conn.request(req, 0)
    finally:
        conn.close()


@pytest.fixture
async def c():
    async with Cluster(brokers=3) as cluster:
        cluster.enable_fault_admin()
        yield cluster


async def test_off_unless_enabled(cluster):
    resp = await send(cluster, command("list"))
    assert resp.error_code == ClusterAuthorizationFailedError.errno
    assert "minibroker serve --faults" in resp.error_message


async def test_error_stacks_latency_and_list_then_clear(c):
    resp = await send(c, command("error", api_key=ApiKey.Produce, broker_id=2,
                                 errors=["NOT_LEADER_OR_FOLLOWER", "DISCONNECT"], count=2))
    assert (resp.error_code, resp.controller_id) == (0, c.controller_node_id)
    state = json.loads(resp.state)
    assert state["errors"] == [dict(api_key=0, broker_id=2, errors=[
        "NOT_LEADER_FOR_PARTITION", "DISCONNECT", "NOT_LEADER_FOR_PARTITION", "DISCONNECT"])]
    assert (await send(c, command("latency", broker_id=3, ms=200))).error_code == 0
    assert (await send(c, command("hold", api_key=ApiKey.Fetch, count=1, ms=50))).error_code == 0
    state = json.loads((await send(c, command("list"))).state)
    assert state["latency_ms"] == {"3": 200} and state["rules"][0]["action"] == "hold"
    state = json.loads((await send(c, command("clear"))).state)
    assert (state["errors"], state["rules"], state["latency_ms"]) == ([], [], {})


@pytest.mark.parametrize(("req", "says"), [
    (command("bogus"), "unknown command 'bogus'"),
    (command("latency", ms=5), "latency: which broker? (--broker N)"),
    (command("latency", broker_id=9, ms=5), "latency: no broker 9 (the brokers: [1, 2, 3])"),
    (command("error", errors=["DISCONNECT"]), "error: which API? (--api NAME)"),
    (command("error", api_key=0, errors=["NO_SUCH_ERROR"]), "unknown error 'NO_SUCH_ERROR'"),
    (command("partition", side_a=[1]), "partition: two sides of broker ids are needed"),
    (command("partition", side_a=[1], side_b=[1, 2]), "a broker cannot be on both sides"),
    (command("start-broker", broker_id=2), "start-broker: broker 2 is already running"),
])
async def test_bad_arguments_answer_invalid_request_in_one_line(c, req, says):
    resp = await send(c, req)
    assert resp.error_code == InvalidRequestError.errno
    assert says in resp.error_message and "\n" not in resp.error_message


async def test_partition_heal_failover_and_broker_lifecycle(c):
    old = c.controller_node_id
    resp = await send(c, command("controller-failover"))
    assert resp.controller_id == c.controller_node_id != old
    other = next(b for b in (1, 2, 3) if b != 1)
    state = json.loads((await send(c, command("partition", side_a=[1],
                                              side_b=[2, 3]))).state)
    assert state["partitions"] == [[1, 2], [1, 3]]
    # Fault control is never cut: a client reaches it through an isolated broker.
    assert (await send(c, command("isolate-clients", broker_id=2), via=1)).error_code == 0
    resp = await send(c, command("isolate-clients", broker_id=1), via=1)
    assert "runs right after the answer" in resp.error_message
    await wait_until(lambda: 1 in c.faults.network.isolated, what="clients cut from broker 1")
    assert json.loads((await send(c, command("list"), via=1)).state)[
        "isolated_from_clients"] == [1, 2]
    assert json.loads((await send(c, command("heal"))).state)["partitions"] == []
    assert (await send(c, command("heal-clients"))).error_code == 0
    assert (await send(c, command("stop-broker", broker_id=other))).error_code == 0
    assert not c.brokers[other].running
    assert (await send(c, command("start-broker", broker_id=other))).error_code == 0
    assert c.brokers[other].running


async def test_stopping_the_serving_broker_answers_first(c):
    resp = await send(c, command("stop-broker", broker_id=1), via=1)
    assert resp.error_code == 0 and "runs right after the answer" in resp.error_message
    await wait_until(lambda: not c.brokers[1].running, what="broker 1 stopped")
    assert json.loads((await send(c, command("list"), via=2)).state)["stopped_brokers"] == [1]
    await send(c, command("start-broker", broker_id=1), via=2)
    assert c.brokers[1].running


async def test_lost_and_slow_update_metadata_by_command(c):
    assert (await send(c, command("lose-update-metadata", broker_id=2, count=1))).error_code == 0
    assert (await send(c, command("slow-update-metadata", broker_id=3, ms=500))).error_code == 0
    state = json.loads((await send(c, command("list"))).state)
    assert (state["lost_update_metadata"], state["update_metadata_delay_ms"]) == \
        ({"2": 1}, {"3": 500})


def test_threaded_cluster_mirrors_the_fault_api():
    with ThreadedCluster(brokers=3) as c:
        c.partition_network([1], [2, 3])
        assert c.cluster.faults.network.cuts() == [(1, 2), (1, 3)]
        c.heal_network()
        old = c.controller_id
        assert c.failover_controller() not in (-1, old)
        c.set_latency(2, 50)
        c.hold(ApiKey.Fetch, ms=10, count=1)
        c.drop(ApiKey.Fetch, count=1, broker_id=3)
        c.push_request_errors(ApiKey.Produce, [DISCONNECT], broker_id=1)
        c.lose_update_metadata(2, 1)
        c.isolate_clients(3)
        state = c.cluster.faults.describe()
        assert (state["latency_ms"], len(state["rules"]), state["lost_update_metadata"],
                state["isolated_from_clients"]) == ({2: 50}, 2, {2: 1}, [3])
        assert state["errors"] == [dict(api_key=0, broker_id=1, errors=["DISCONNECT"])]
        c.clear_faults()
        assert not c.cluster.faults.armed and c.cluster.faults.describe()["rules"] == []
