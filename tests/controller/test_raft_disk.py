"""The voters' copies of the metadata log on disk (serve --processes --data-dir): each record keeps
the epoch of the leader that appended it (controller/metadata_store.py), so Raft's vote and log
matching compare the real epochs after a restart, and so does a snapshot (its last record's);
a directory written before records kept their epoch still loads, as epoch 0."""
from __future__ import annotations

import dataclasses
import os
import pathlib
import struct

import pytest

from minibroker.controller.image import MetadataImage
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.metadata_store import MetadataStore
from minibroker.controller.raft import CANDIDATE
from minibroker.controller.snapshot import to_text
from minibroker.log.batch import crc32c
from tests.controller.raft_network import Network, elect, elect_and_commit, fence


def encoded(record, epoch: int) -> list:
    """[(epoch, entry)]: the record as an append carries it."""
    scratch = MetadataLog()
    scratch.append(record, epoch)
    return scratch.records(0, 1)


def names(net: Network, i: int) -> list[int]:
    """The broker ids of voter i's fence records, in log order."""
    return [r.id for _, r in net.nodes[i].log.read_all()]


async def test_after_a_whole_restart_a_longer_log_of_a_stale_epoch_loses_the_vote(tmp_path):
    """Voter 1 led epoch 1 and appended two records no other voter got; voters 2 and 3 then
    committed one in epoch 2. Read back from disk, voter 1's log is longer but of epoch 1: voter
    3 must refuse it (its vote would let 1 overwrite the committed record) and win itself."""
    net = Network(state_dir=tmp_path, logs_on_disk=True)
    old = await elect(net, 1)
    old.append(1, fence(10))
    await net.pump()                                     # committed everywhere
    net.down = {2, 3}
    old.append(1, fence(11))
    old.append(1, fence(12))                             # reaches nobody
    await net.pump()
    net.down = {1}
    await elect_and_commit(net, 2, fence(20))            # 2 and 3: a majority
    for i in (1, 2, 3):                                  # every process started again
        net.restart(i)
    assert [len(net.nodes[i].log) for i in (1, 2, 3)] == [3, 2, 2]
    net.down = {2}
    stale = net.nodes[1]
    for _ in range(3):                                   # past the epochs 2 and 3 knew
        stale.stand()
        await net.pump()
    assert stale.role == CANDIDATE and stale.epoch > 2
    await elect(net, 3)
    net.nodes[3].append(net.nodes[3].epoch, fence(30))
    await net.pump()
    assert names(net, 1) == names(net, 3) == [10, 20, 30]


async def test_a_new_leader_writes_its_inherited_tail_under_its_epoch_before_counting_it(
        tmp_path):
    net = Network(state_dir=tmp_path, logs_on_disk=True)
    old = await elect(net, 1)
    net.down = {3}
    old.append(1, fence(5))
    await net.pump()
    net.down = {1}
    old_epochs = [net.nodes[2].epoch_at(0)]
    new = await elect(net, 2)                            # its tail: 1's record, not known committed
    again = net.restart(2)
    assert old_epochs == [1] and again.epoch_at(0) == new.epoch == 2


async def test_a_follower_keeps_what_matches_and_replaces_a_divergent_tail_on_disk(tmp_path):
    net = Network(state_dir=tmp_path, logs_on_disk=True)
    leader = await elect(net, 1)
    for b in (1, 2, 3):
        leader.append(1, fence(b))
    await net.pump()
    follower = net.nodes[2]
    follower.receive(1, ("append", 1, 1, 1, 1, leader.log.records(1, 2), 1))   # repeated, late
    assert net.queue[-1] == (2, 1, ("appended", 1, True, 2))    # matched to 2 of its 3
    assert len(follower.log) == 3                        # nothing it holds is dropped
    other = encoded(fence(9), 2)                         # epoch 2's leader, 3, holds another
    follower.receive(3, ("append", 2, 3, 2, 1, other, 2))
    assert net.queue[-1] == (2, 3, ("appended", 2, True, 3))
    assert [follower.epoch_at(o) for o in range(3)] == [1, 1, 2] and len(follower.log) == 3
    again = MetadataLog(MetadataStore(str(tmp_path / "2")))
    assert [again.epoch_at(o) for o in range(3)] == [1, 1, 2]
    assert [r.id for _, r in again.read_all()] == [1, 2, 9]


def _image_at(offset: int) -> MetadataImage:
    return dataclasses.replace(MetadataImage(), offset=offset)


def test_epochs_round_trip_through_the_records_and_a_snapshot(tmp_path):
    log = MetadataLog(MetadataStore(str(tmp_path)))
    for epoch, b in ((1, 1), (1, 2), (3, 3)):
        log.append(fence(b), epoch)
    again = MetadataLog(MetadataStore(str(tmp_path)))
    assert [again.epoch_at(o) for o in range(-1, 3)] == [-1, 1, 1, 3]
    assert again.maybe_snapshot(_image_at(2), 0)
    again.append(fence(4), 5)
    assert [n for n in sorted(os.listdir(tmp_path)) if n.endswith(".checkpoint")] == \
        [f"{3:020d}-{3:010d}.checkpoint"]               # KRaft's snapshot id: end offset, epoch
    last = MetadataLog(MetadataStore(str(tmp_path)))
    assert (last.base, last.snapshot_epoch, last.snapshot) == (3, 3, _image_at(2))
    assert [last.epoch_at(o) for o in (2, 3)] == [3, 5]
    assert [r.id for _, r in last.read_all()] == [4]


async def test_a_followers_copy_of_a_snapshot_keeps_its_epoch_on_disk(tmp_path):
    net = Network(state_dir=tmp_path, logs_on_disk=True)
    leader = await elect(net, 1)
    for b in range(3):
        leader.append(1, fence(b))
    await net.pump()
    before = leader.log.base
    assert leader.log.maybe_snapshot(_image_at(2), 0)
    leader.snapshotted(before)
    leader.append(1, fence(9))
    await net.pump()
    follower = net.restart(3)
    assert (follower.log.base, follower.log.snapshot_epoch, follower.last()) == (3, 1, (1, 4))


def _old_frame(offset: int, record) -> bytes:
    """A record framed as metadata_store.py wrote it before records kept their epoch."""
    data = bytes(record.encode(version=record.version or 0))
    name = type(record).__name__.encode()
    body = struct.pack(">hh", record.version or 0, len(name)) + name + data
    return struct.pack(">qiI", offset, len(body), crc32c(body)) + body


def _old_directory(path: pathlib.Path) -> None:
    """A snapshot up to offset 1 (named epoch 4, as the leader then wrote it) and two records."""
    path.mkdir()
    (path / f"{2:020d}-{4:010d}.checkpoint").write_text(to_text(_image_at(1)))
    (path / f"{2:020d}.log").write_bytes(_old_frame(2, fence(5)) + _old_frame(3, fence(6)))


def test_a_directory_from_before_epochs_loads_as_epoch_0_and_appends_after(tmp_path):
    _old_directory(tmp_path / "1")
    log = MetadataLog(MetadataStore(str(tmp_path / "1")))
    assert (log.base, log.snapshot, log.snapshot_epoch) == (2, _image_at(1), 0)
    assert [log.epoch_at(o) for o in (1, 2, 3)] == [0, 0, 0]
    assert [r.id for _, r in log.read_all()] == [5, 6]
    log.append(fence(7), 2)                              # new frames after old ones
    again = MetadataLog(MetadataStore(str(tmp_path / "1")))
    assert [again.epoch_at(o) for o in (2, 3, 4)] == [0, 0, 2]
    assert [r.id for _, r in again.read_all()] == [5, 6, 7]


async def test_a_voter_on_a_directory_from_before_epochs_follows_and_leads(tmp_path):
    for i in (1, 2, 3):
        _old_directory(tmp_path / str(i))
    net = Network(state_dir=tmp_path, logs_on_disk=True)
    assert net.nodes[1].last() == (0, 4)
    leader = await elect(net, 1)
    leader.append(leader.epoch, fence(8))
    await net.pump()
    assert leader.commit == 5 and names(net, 2) == names(net, 3) == [5, 6, 8]
    assert net.restart(3).last() == (1, 5) and net.nodes[3].epoch_at(2) == 1


def test_a_snapshot_of_an_unknown_version_is_refused(tmp_path):
    (tmp_path / f"{2:020d}-{4:010d}.checkpoint").write_text('{"version": 9}\n{}')
    with pytest.raises(ValueError, match="snapshot version 9"):
        MetadataLog(MetadataStore(str(tmp_path)))


def test_a_torn_rewrite_of_a_tail_keeps_the_frames_before_it(tmp_path):
    log = MetadataLog(MetadataStore(str(tmp_path)))
    for b in range(3):
        log.append(fence(b), 1)
    log.write_from(1, encoded(fence(9), 2))
    name = next(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    os.truncate(tmp_path / name, os.path.getsize(tmp_path / name) - 2)
    again = MetadataLog(MetadataStore(str(tmp_path)))
    assert [again.epoch_at(o) for o in range(3)] == [1, 1, 1]     # the old tail, whole
    assert [r.id for _, r in again.read_all()] == [0, 1, 2]
