"""metadata-quorum and features as Kafka's kafka-metadata-quorum.sh and kafka-features.sh print
them (MetadataQuorumCommand, FeatureCommand), against a 3-broker cluster whose voters are 1 and 2
(broker 3 is an observer)."""
from __future__ import annotations

import re
import time

import pytest

from serve_helpers import run_main
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster():
    with ThreadedCluster(brokers=3, controller_quorum_voters=(1, 2)) as c:
        yield c


def quorum(cluster, capsys, *args: str) -> tuple[int, str, str]:
    return run_main(capsys, "metadata-quorum", "--bootstrap-server", cluster.bootstrap, *args)


def test_status(cluster, capsys):
    code, out, err = quorum(cluster, capsys, "describe", "--status")
    assert code == 0, err
    q = cluster.cluster.quorum
    hw = len(q.leader_log())
    assert out.splitlines() == [
        f"ClusterId:              {cluster.cluster.cluster_id}",
        f"LeaderId:               {q.leader_id}",
        f"LeaderEpoch:            {q.epoch}",
        f"HighWatermark:          {hw}",
        "MaxFollowerLag:         0",
        "MaxFollowerLagTimeMs:   0",          # every live voter caught up at the same time
        'CurrentVoters:          [{"id": 1, "directoryId": null}, {"id": 2, "directoryId": null}]',
        'CurrentObservers:       [{"id": 3, "directoryId": null}]']


def test_replication(cluster, capsys):
    code, out, err = quorum(cluster, capsys, "describe", "--replication")
    assert code == 0, err
    q = cluster.cluster.quorum
    leader, follower = q.leader_id, ({1, 2} - {q.leader_id}).pop()
    rows = [re.split(r"\s*\t", line.rstrip()) for line in out.splitlines()]
    assert rows[0] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                       "LastCaughtUpTimestamp", "Status"]
    assert [(r[0], r[1], r[3], r[6]) for r in rows[1:]] == [
        (str(leader), "AAAAAAAAAAAAAAAAAAAAAA", "0", "Leader"),
        (str(follower), "AAAAAAAAAAAAAAAAAAAAAA", "0", "Follower"),
        ("3", "AAAAAAAAAAAAAAAAAAAAAA", "0", "Observer")]
    assert {r[2] for r in rows[1:]} == {str(len(q.leader_log()))}
    # Kafka pads each cell to its column's width, then a tab.
    assert out.splitlines()[0].startswith("NodeId\tDirectoryId           \tLogEndOffset\t")
    now = int(time.time() * 1000)
    assert all(abs(int(r[4]) - now) < 60_000 for r in rows[1:])


def test_replication_human_readable(cluster, capsys):
    code, out, err = quorum(cluster, capsys, "describe", "--replication", "--human-readable")
    assert code == 0, err
    for line in out.splitlines()[1:]:
        assert re.search(r"\t\d+ ms ago\s*\t\d+ ms ago\s*\t", line), line


@pytest.mark.parametrize("args, says", [
    (["describe"], "One of --status or --replication must be specified with describe sub-command"),
    (["describe", "--status", "--replication"],
     "Only one of --status or --replication should be specified with describe sub-command"),
    (["describe", "--status", "--human-readable"],
     "The option --human-readable is only supported along with --replication"),
    (["add-controller"], "controllers cannot be added or removed"),
    (["remove-controller", "--controller-id", "1"], "controllers cannot be added or removed"),
])
def test_bad_invocations(cluster, capsys, args, says):
    code, out, err = quorum(cluster, capsys, *args)
    assert code != 0 and len(err.splitlines()) == 1 and says in err, err


def test_bootstrap_controller_is_refused(capsys):
    code, out, err = run_main(capsys, "metadata-quorum", "--bootstrap-controller", "h:1",
                              "describe", "--status")
    assert code != 0 and len(err.splitlines()) == 1 and "reached through them" in err, err


def test_features_describe(cluster, capsys):
    code, out, err = run_main(capsys, "features", "--bootstrap-server", cluster.bootstrap,
                              "describe")
    assert code == 0, err
    epoch = cluster.cluster.brokers[1].metadata.metadata_offset
    assert epoch >= 0
    assert out.splitlines() == [
        f"Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
        f"FinalizedVersionLevel: 1\tEpoch: {epoch}",
        f"Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\t"
        f"FinalizedVersionLevel: 0\tEpoch: {epoch}",
        f"Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.0-IV3\t"
        f"FinalizedVersionLevel: 4.0-IV3\tEpoch: {epoch}",
        f"Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\t"
        f"FinalizedVersionLevel: 0\tEpoch: {epoch}"]


@pytest.mark.parametrize("args", [["upgrade", "--release-version", "4.0-IV3"],
                                  ["downgrade", "--feature", "group.version=0"],
                                  ["disable", "--feature", "group.version"], ["upgrade"]])
def test_features_changes_are_refused(cluster, capsys, args):
    code, out, err = run_main(capsys, "features", "--bootstrap-server", cluster.bootstrap, *args)
    assert code != 0 and err.splitlines() == [err.strip()] and "no feature levels to change" \
        in err, err
