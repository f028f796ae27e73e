"""The metadata quorum across processes (controller/raft.py), its voters wired by an in-memory
network (raft_network.py): majority elections, majority commit, the election restriction, a
lagging or divergent follower given the leader's copy, and a voter that lost its log standing
only once given it. test_raft_disk.py: the voters' copies on disk."""
from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from minibroker.controller.image import MetadataImage
from minibroker.controller.quorum import NotLeader
from minibroker.controller.quorum_state import ElectionState, QuorumStateStore
from minibroker.controller.raft import CANDIDATE, FOLLOWER, LEADER, RaftNode
from tests.controller.raft_network import Network, elect, elect_and_commit, fence


async def test_a_majority_elects_and_every_voter_learns_the_leader():
    net = Network()
    leader = await elect(net, 1)
    assert leader.epoch == 1 and net.led == [(1, 1)]        # nothing to commit first: leads
    assert [(n.role, n.leader_id, n.epoch) for n in net.nodes.values()] == \
        [(LEADER, 1, 1), (FOLLOWER, 1, 1), (FOLLOWER, 1, 1)]


async def test_one_voter_of_three_is_no_majority():
    net = Network()
    net.down = {2, 3}
    net.nodes[1].stand()
    await net.pump()
    assert net.nodes[1].role == CANDIDATE and net.led == []


async def test_a_record_commits_once_a_majority_holds_it_and_not_before():
    net = Network()
    leader = await elect(net, 1)
    net.down = {2, 3}
    leader.append(1, fence(5))
    waiting = asyncio.ensure_future(leader.commit_to(1, 1))
    await net.pump()
    assert not waiting.done() and leader.commit == 0        # only the leader holds it
    net.down = {3}
    leader._replicate(asyncio.get_running_loop().time() + 10)   # the lost append sent again
    await net.pump()
    await asyncio.wait_for(waiting, 1)
    assert leader.commit == 1 and net.entries(2) == net.entries(1)
    assert net.nodes[2].commit <= 1 and len(net.nodes[3].log) == 0


async def committed_without_3(net: Network) -> RaftNode:
    """Voter 1 leads; one record committed while voter 3 is down."""
    leader = await elect(net, 1)
    net.down = {3}
    leader.append(1, fence(5))
    await net.pump()
    return leader


async def test_a_shorter_log_is_refused_the_vote_and_the_longest_wins():
    net = Network()
    leader = await committed_without_3(net)
    assert leader.commit == 1 and len(net.nodes[3].log) == 0
    net.down = {1}                                           # the leader's process died
    net.nodes[3].stand()                                     # behind: 2 refuses
    await net.pump()
    assert net.nodes[3].role == CANDIDATE
    new = await elect(net, 2)
    assert new.epoch == 3 and net.entries(2) == net.entries(3)   # 3 got the committed record
    assert (2, 3) in net.led


async def test_a_deposed_leader_writes_nothing_more():
    net = Network()
    old = await elect(net, 1)
    net.down = {1}
    await elect(net, 2)
    net.down = set()
    old.append(1, fence(5))                                  # it still thinks it leads epoch 1
    waiting = asyncio.ensure_future(old.commit_to(1, len(old.log)))
    await net.pump()                                         # its append meets epoch 2
    with pytest.raises(NotLeader):
        await waiting
    with pytest.raises(NotLeader):
        old.append(1, fence(6))
    assert old.role == FOLLOWER and old.epoch == 2


async def test_a_divergent_tail_is_replaced_by_the_new_leaders_copy():
    net = Network()
    old = await elect(net, 1)
    net.down = {2, 3}
    old.append(1, fence(7))                                  # never reaches a majority
    await net.pump()
    net.down = {1}
    new = await elect_and_commit(net, 2, fence(8))
    net.down = set()
    new._replicate(asyncio.get_running_loop().time() + 10)  # heartbeat: 1 follows, mismatches
    await net.pump()
    assert net.entries(1) == net.entries(2) == net.entries(3)
    assert [e[0] for e in net.entries(1)] == ["FenceBrokerRecord"]
    assert old.role == FOLLOWER and old.leader_id == 2


async def test_a_voter_that_lost_its_log_stands_only_once_given_it():
    net = Network()
    leader = await elect(net, 1)
    leader.append(1, fence(5))
    await net.pump()
    empty = net.restart_empty(3)
    empty.stand()
    assert empty.role == FOLLOWER and empty.epoch == 0       # did not stand
    leader._replicate(asyncio.get_running_loop().time() + 10)
    await net.pump()
    assert empty.can_stand and net.entries(3) == net.entries(1)


async def test_a_new_leader_commits_the_tail_it_inherited_before_it_leads():
    net = Network()
    old = await committed_without_3(net)
    old.append(1, fence(6))                                  # reaches 2, not yet committed
    await asyncio.sleep(0)
    net.queue = [m for m in net.queue if m[2][0] != "appended"]  # 2's answer is lost
    for src, dest, msg in list(net.queue):
        if dest == 2:
            net.nodes[2].receive(src, msg)
    net.queue.clear()
    assert len(net.nodes[2].log) == 2 and net.nodes[2].commit == 1
    net.down = {1}
    new = await elect(net, 2)
    assert new.commit == 2 and (2, new.epoch) in net.led     # proposed again, committed, leads
    assert new.epoch_at(1) == new.epoch


async def test_the_leader_describes_each_voters_acknowledged_end():
    net = Network()
    leader = await elect(net, 2)
    net.down = {3}
    leader.append(1, fence(5))
    await net.pump()
    info = leader.describe()
    assert (info.leader_id, info.leader_epoch, info.high_watermark) == (2, 1, 1)
    assert [(r.replica_id, r.log_end_offset) for r in info.voters] == [(1, 1), (2, 1), (3, 0)]
    assert info.voters[2].last_caught_up_timestamp == -1 and info.observers == ()


async def test_a_leader_gone_quiet_is_replaced_after_the_election_timeout():
    """No word that the leader's process died: a follower stands once it heard nothing for
    the election timeout (the voters' own clocks run)."""
    net = Network()
    await elect(net, 1)
    net.down = {1}
    clocks = [asyncio.ensure_future(net.nodes[i].run()) for i in (2, 3)]
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            await net.pump()
            if any(net.nodes[i].role == LEADER for i in (2, 3)):
                break
    finally:
        for c in clocks:
            c.cancel()
    assert sorted(n.role for i, n in net.nodes.items() if i != 1) == [FOLLOWER, LEADER]
    assert net.nodes[2].epoch == net.nodes[3].epoch > 1


async def test_after_a_snapshot_the_followers_get_it_instead_of_keeping_every_record():
    net = Network()
    leader = await elect(net, 1)
    for i in range(5):
        leader.append(1, fence(i))
    await net.pump()
    before = leader.log.base
    leader.log.maybe_snapshot(_image_at(len(leader.log) - 1), 0)
    leader.snapshotted(before)
    leader._replicate(asyncio.get_running_loop().time())
    await net.pump()
    assert [n.log.base for n in net.nodes.values()] == [5, 5, 5]
    assert all(n.log.record_count == 0 for n in net.nodes.values())


def _image_at(offset: int) -> MetadataImage:
    return dataclasses.replace(MetadataImage(), offset=offset)


def voted_for_1_in_epoch_1(net: Network) -> None:
    """Voter 1 stands in epoch 1 and is elected with voter 2's vote; voter 3 hears nothing, and
    neither hears from 1 as leader (its appends are lost)."""
    net.nodes[1].stand()
    net.deliver(lambda src, dest, m: dest == 2)            # 1's request reaches 2 only
    net.deliver(lambda src, dest, m: dest == 1)            # 2's vote reaches 1: it leads
    net.queue.clear()
    assert net.leaders(1) == [1] and net.nodes[3].epoch == 0 and net.nodes[2].voted_for == 1


async def test_a_voter_started_again_without_its_state_votes_only_once_it_heard_a_leader():
    net = Network()
    voted_for_1_in_epoch_1(net)
    forgetful = net.restart_empty(2)                     # its vote for 1 in epoch 1 forgotten
    net.nodes[3].stand()                                 # epoch 1 too: it heard nothing of 1
    await net.pump()
    assert net.leaders(1) == [1] and net.nodes[3].role == CANDIDATE   # not a second leader
    assert (forgetful.epoch, forgetful.voted_for) == (1, -1)
    net.nodes[1]._replicate(asyncio.get_running_loop().time() + 10)   # 1's heartbeat
    net.deliver(lambda src, dest, m: dest == 2)
    assert forgetful.leader_id == 1
    forgetful.receive(3, ("vote", 1, 3, -1, 0))          # 3's request again, delayed
    assert net.queue[-1] == (2, 3, ("voted", 1, False))  # 1 leads epoch 1: no vote in it
    await net.pump()
    net.down = {1}
    await elect(net, 3)                                  # epoch 2: 2's vote elects 3
    assert forgetful.voted_for == 3


async def test_a_voter_that_forgot_its_vote_votes_again_after_an_election_timeout():
    """The leader's process died too: nobody leads to hear from, so the vote waits out one
    election timeout (any election it voted in before is over) and a majority elects again."""
    net = Network(timeout_ms=200)
    voted_for_1_in_epoch_1(net)
    net.down = {1}
    forgetful = net.restart_empty(2)
    net.nodes[3].stand()
    await net.pump()
    assert net.nodes[3].role == CANDIDATE and forgetful.voted_for == -1
    for _ in range(100):                                 # 3 stands again until elected
        await asyncio.sleep(0.02)
        net.nodes[3].stand()
        await net.pump()
        if net.nodes[3].role == LEADER:
            break
    assert net.nodes[3].role == LEADER and forgetful.voted_for == 3


async def test_the_election_state_survives_a_restart_in_the_quorum_state_file(tmp_path):
    net = Network(state_dir=tmp_path)
    voted_for_1_in_epoch_1(net)
    granted = [disk for src, m, disk in net.on_disk_when_sent if src == 2 and m[0] == "voted"]
    assert granted == [ElectionState(1, 1, -1)]          # on disk before the vote left
    assert json.loads((tmp_path / "2" / "quorum-state").read_text()) == \
        {"leaderEpoch": 1, "votedId": 1, "leaderId": -1, "data_version": 1}
    again = net.restart(2)
    assert (again.epoch, again.voted_for, again.role) == (1, 1, FOLLOWER)
    net.nodes[3].stand()                                 # epoch 1: 2 already voted in it
    await net.pump()
    assert net.leaders(1) == [1] and net.nodes[3].role == CANDIDATE
    net.nodes[1]._replicate(asyncio.get_running_loop().time() + 10)
    await net.pump()                                     # 2 and 3 follow 1: written down
    assert QuorumStateStore(str(tmp_path / "3")).load() == ElectionState(1, 3, 1)   # its own
    assert QuorumStateStore(str(tmp_path / "1")).load() == ElectionState(1, 1, 1)


async def test_a_voters_acknowledgement_stops_counting_once_its_process_died():
    net = Network(n=5)
    leader = await elect(net, 1)
    net.down = {3, 4, 5}
    leader.append(1, fence(5))
    await net.pump()
    assert leader.commit == 0 and len(net.nodes[2].log) == 1   # 2 of 5 hold it
    leader.peer_died(2)
    net.restart_empty(2)
    net.down = {2, 4, 5}
    leader._replicate(asyncio.get_running_loop().time() + 10)
    await net.pump()
    assert len(net.nodes[3].log) == 1 and leader.commit == 0   # 1 and 3: 2 lost its copy
    net.down = {4, 5}
    leader._replicate(asyncio.get_running_loop().time() + 20)
    await net.pump()
    assert leader.commit == 1 and len(net.nodes[2].log) == 1


async def test_a_voter_answering_without_the_records_no_longer_counts_for_them():
    """No word of its process's death reached the leader first: its refusal says how much it
    holds now."""
    net = Network(n=5)
    leader = await elect(net, 1)
    net.down = {3, 4, 5}
    leader.append(1, fence(5))
    await net.pump()
    net.restart_empty(2)
    now = asyncio.get_running_loop().time()
    leader._replicate(now + 10)                          # a heartbeat: 2 refuses it
    net.deliver(lambda src, dest, m: dest == 2)
    net.deliver(lambda src, dest, m: dest == 1)
    net.queue.clear()                                    # the leader's copy to 2 is lost
    net.down = {2, 4, 5}
    leader._replicate(now + 20)
    await net.pump()
    assert len(net.nodes[3].log) == 1 and leader.commit == 0
