"""Issue 25 item 6: the active controller lives on a broker (combined mode) and fails over.

Each voter holds a copy of the metadata log; stopping the broker that hosts the active controller
elects another live voter (a new controller epoch) that replays its copy. The two steps of a
KIP-253 procedure are committed one after the other with a real await between them, so stopping
the controller's broker there — a real stop, found by watching the log, not a fault site — splits
them, and the next controller finishes the procedure from the log. A KIP-179 reassignment in
progress survives the same.
"""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import RequestTimedOutError

from kafka.protocol.metadata import MetadataRequest

from minibroker.client import Admin, TopicPartition
from minibroker.cluster import Cluster
from minibroker.network import memory
from minibroker.protocol import records as R
from tests.cluster_helpers import memory_broker, settle_partition_count
from tests.controller.test_reassignment import _cluster_with, _moved

pytestmark = pytest.mark.timeout(60)


async def _stop_host_once_committed(c: Cluster, committed) -> tuple[int, int]:
    """Once `committed` resolves, stop the broker hosting the controller: (that broker, the
    length its copy of the log had)."""
    await committed
    host = c.controller_node_id
    await c.stop_broker(host)
    return host, len(c.quorum.copies[host])


def _types(c: Cluster, start: int) -> list[str]:
    return [type(r).__name__ for _, r in list(c.metadata_log.read_all())[start:]]


async def test_metadata_names_the_broker_hosting_the_controller_and_a_new_one_after_it_stops():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 1, 3)
        assert c.controller_node_id == 1
        assert all(b.metadata.controller_id == 1 for b in c.brokers.values())
        await c.stop_broker(1)
        assert c.controller_node_id == 2 and c.controller.controller_epoch == 2
        for bid in (2, 3):
            assert c.brokers[bid].metadata.controller_id == 2
            assert c.brokers[bid].replica_manager.controller_epoch == 2
        # every live voter holds the same log; the stopped one kept what it had
        assert c.quorum.copies[2]._entries == c.quorum.copies[3]._entries
        assert len(c.quorum.copies[1]) < len(c.quorum.copies[2])   # broker 1's fencing is newer
        await c.create_topic("after", 2, 2)                        # the new controller works
        await c.start_broker(1)                                    # catches up its copy
        assert c.quorum.copies[1]._entries == c.quorum.copies[2]._entries
        await c.stop_broker(2)
        assert c.controller_node_id == 3
        await c.stop_broker(3)
        assert c.controller_node_id == 1                           # back to the first voter
        assert sorted(c.controller.image.topics) == ["after", "t"]


async def test_only_voters_host_the_controller():
    async with Cluster(brokers=3, controller_quorum_voters=(2, 3)) as c:
        assert c.controller_node_id == 2
        assert sorted(c.quorum.copies) == [2, 3]
        await c.stop_broker(2)
        assert c.controller_node_id == 3
        await c.stop_broker(3)                                     # no voter left: no controller
        assert c.controller is None and c.controller_node_id == -1
        await c.start_broker(2)                                    # a voter is back: elected
        assert c.controller_node_id == 2
        ctl = await c.active_controller()
        assert ctl.image.brokers[3].fenced and not ctl.image.brokers[1].fenced
    with pytest.raises(ValueError, match="controller.quorum.voters"):
        Cluster(brokers=3, controller_quorum_voters=(4,))


async def test_a_stopped_controller_writes_nothing_more():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 1, 3)
        first = c.controller
        await c.stop_broker(1)
        before = len(c.metadata_log)
        with pytest.raises(Exception):                # refused by the quorum (a stale epoch)
            await first.create_topics([("x", 1, 1, None, {})], validate_only=False)
        assert len(c.metadata_log) == before and "x" not in c.controller.image.topics


async def test_expansion_split_by_stopping_the_controllers_broker_between_its_steps():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 2, 3)
        first, start = c.controller, len(c.metadata_log)
        # step 1: the count record and an epoch bump of each of the 2 partitions
        stopper = asyncio.create_task(_stop_host_once_committed(
            c, c.quorum.wait_committed(start + 3)))
        res = await c.channel.create_partitions("t", 4, None, False)   # as a broker forwards it
        host, held = await stopper
        assert res.error_code == RequestTimedOutError.errno
        assert held == start + 3           # the stopped controller wrote step 1 and no more
        ctl = await c.active_controller()
        assert ctl.controller_id != host and ctl.controller_epoch == first.controller_epoch + 1
        t = ctl.image.topics["t"]
        assert sorted(t.partitions) == [0, 1, 2, 3]
        assert [t.partitions[p].leader_epoch for p in range(4)] == [1, 1, 0, 0]
        assert t.partitions[2].leader_epoch_after_creation == ((0, 0), (1, 0))
        assert t.pending_after_creation == ()
        assert host not in t.partitions[2].replicas + t.partitions[3].replicas
        kinds = _types(c, start)
        assert kinds[:3] == ["TopicPartitionCountRecord", "PartitionChangeRecord",
                             "PartitionChangeRecord"]
        assert kinds[3:].count("PartitionRecord") == 2     # step 2, by the next controller
        await settle_partition_count(c, "t", 4)


async def test_deletion_split_by_stopping_the_controllers_broker_between_its_steps():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 2, 3)
        assert (await c.channel.create_partitions("t", 4, None, False)).error_code == 0
        start = len(c.metadata_log)
        stopper = asyncio.create_task(_stop_host_once_committed(    # step 1: the count
            c, c.quorum.wait_committed(start + 1)))
        res = await c.channel.create_partitions("t", 2, None, False)
        host, held = await stopper
        assert res.error_code == RequestTimedOutError.errno and held == start + 1
        t = (await c.active_controller()).image.topics["t"]
        assert c.controller_node_id != host
        assert t.undeleted_partition_count == 2
        assert [t.partitions[p].marked_for_deletion for p in range(4)] == \
            [False, False, True, True]
        assert all(t.partitions[p].leader_epoch_before_deletion == ((0, 1), (1, 1))
                   for p in (2, 3))
        assert [t.partitions[p].leader_epoch for p in (0, 1)] == [2, 2]


async def test_a_reassignment_in_progress_survives_stopping_the_controllers_broker():
    async with Cluster(brokers=4) as c, Admin(c.bootstrap) as admin:
        await _cluster_with(c, "t", [2, 3], 5)
        await c.stop_broker(4)                      # the new replica cannot catch up yet
        rid, _ = await admin.assign_partitions({TopicPartition("t", 0): [2, 4]})
        assert (await c.active_controller()).partition("t", 0).reassigning
        await c.stop_broker(c.controller_node_id)   # broker 1 hosts it
        ctl = await c.active_controller()
        assert ctl.controller_id in (2, 3) and rid in ctl.image.reassignments
        await c.start_broker(4)
        await _moved(c, "t", [2, 4])
        _, progress = await admin.partition_assignment_status(rid)
        assert {v[0] for v in progress.values()} == {0}


async def test_a_stopped_broker_answers_nothing_on_a_connection_it_accepted_while_stopping():
    # A connection accepted as the broker stopped once answered Metadata naming the stopped
    # broker as controller, and librdkafka kept waiting for it.
    b = await memory_broker()
    await b.stop()
    client = memory.connect(b.handle, connections=b.connections)
    with pytest.raises(Exception):
        await asyncio.wait_for(client.request(MetadataRequest(topics=[]), 1), 5)
    assert client.closed


async def test_a_voter_stopped_while_its_controller_starts_hands_over_to_the_next():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 1, 3)
        await c.stop_controller()
        starting = asyncio.ensure_future(c.start_controller())
        await asyncio.sleep(0)                      # the election ran: broker 2 is starting
        assert c.quorum.leader_id == 2 and c.controller is None
        await c.stop_broker(2)
        await starting
        assert c.controller_node_id == 3 and c.controller.controller_epoch == 3
        assert c.controller.image.brokers[2].fenced
        await c.create_topic("after", 1, 2)
