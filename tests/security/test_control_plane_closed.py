"""The issue's attack, replayed: a local process lists the listening ports (/proc/net/tcp) and
sends each the controller's requests. In one process it finds only the client ports, and they
close the connection; with an authorizer on, the control plane itself wants CLUSTER_ACTION
(tests/security/test_authorization_table.py, keys 4-6)."""
from __future__ import annotations

import asyncio
import os

import pytest
from kafka.errors import ClusterAuthorizationFailedError

from minibroker.cluster import Cluster
from minibroker.network import memory
from minibroker.protocol.messages import StopReplicaRequest
from minibroker.security.principal import KafkaPrincipal
from tests.broker.test_control_plane import attacks, raw
from tests.security.acl_helpers import STANDARD

pytestmark = pytest.mark.timeout(60)


def listening_ports(pid: int | str) -> set[int]:
    """The TCP ports process `pid` listens on, as any local process can list them."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:           # LISTEN
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


async def test_one_process_has_no_control_plane_port_to_find(caplog):
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 1, 3)
        leader = await c.leader_of("t", 0)
        before = {i: c.brokers[i].replica_manager.log_range("t", 0) for i in c.brokers}
        ports = listening_ports("self")
        assert ports == {b.port for b in c.brokers.values()}
        for port in sorted(ports):
            for req, version in attacks(leader).values():
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(raw(req, version))
                await writer.drain()
                assert await asyncio.wait_for(reader.read(), 10) == b""   # closed, unanswered
                writer.close()
        assert {i: c.brokers[i].replica_manager.log_range("t", 0) for i in c.brokers} == before
        await c.create_topic("after", 1, 3)         # nothing wedged


async def test_over_sockets_the_brokers_principal_needs_cluster_action():
    """With inter-broker sockets there is a control-plane port, and with an authorizer its
    requests need CLUSTER_ACTION: over PLAINTEXT the brokers are User:ANONYMOUS, which must then
    be a super user (as in Kafka); a principal without it is refused."""
    async with Cluster(brokers=2, minibroker_inter_broker_sockets=True,
                       authorizer_class_name=STANDARD, super_users="User:ANONYMOUS") as c:
        await c.create_topic("t", 1, 2)
        b = c.brokers[1]
        assert b.control_port > 0
        stranger = memory.connect(b.control_handle, connections={})
        memory.server_of(stranger).principal = KafkaPrincipal("User", "mallory")
        st = StopReplicaRequest.StopReplicaTopicState
        r = await stranger.request(StopReplicaRequest(
            controller_id=1, is_k_raft_controller=False, controller_epoch=c.controller_epoch,
            broker_epoch=b.broker_epoch, topic_states=[st(topic_name="t", partition_states=[
                st.StopReplicaPartitionState(partition_index=0, leader_epoch=-1,
                                             delete_partition=True)])]), 4)
        assert r.error_code == ClusterAuthorizationFailedError.errno
        assert b.replica_manager.get("t", 0) is not None
