"""`minibroker metadata-quorum` — kafka-metadata-quorum.sh (DescribeQuorum, key 55; KIP-595).

    minibroker metadata-quorum --bootstrap-server 127.0.0.1:9092 describe --status
    minibroker metadata-quorum --bootstrap-server ... describe --replication [--human-readable]

The quorum of __cluster_metadata-0: its leader (the broker hosting the active controller), epoch
and high watermark, and each voter's (serve --controller-quorum-voters, by default every broker)
and observer's log end offset, as Kafka prints them. The controllers listen on their brokers'
ports here, so no voter lists endpoints and there is no --bootstrap-controller.
"""
from __future__ import annotations

import time

from kafka.errors import for_code
from kafka.protocol.admin import DescribeQuorumRequest

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import (add_switches, check_refused, fail, refuse_bootstrap_controller,
                                   refuse_command)
from minibroker.cli.transactions import print_table
from minibroker.client.admin import Admin

METADATA_TOPIC = "__cluster_metadata"
ZERO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"    # Kafka's Uuid.ZERO_UUID printed (base64)
_FIXED = ("minibroker's controller quorum is fixed when the cluster starts "
          "(serve --controller-quorum-voters): controllers cannot be added or removed")


def add_metadata_quorum_parser(sub) -> None:
    p = add_admin_tool_parser(sub, "metadata-quorum", __doc__,
                              "the KRaft metadata quorum's leader, voters and lag", _main,
                              check=_check)
    refuse_bootstrap_controller(p, " (every broker answers DescribeQuorum)")
    cmd = p.add_subparsers(dest="quorum_command", required=True, metavar="COMMAND")
    d = cmd.add_parser("describe", help="Describe the metadata quorum info")
    add_switches(d, ("--status", "a short summary of the quorum status"),
                 ("--replication", "detailed information about the status of replication"),
                 ("--human-readable", "with --replication: timestamps as \"N ms ago\""))
    refuse_command(cmd, "add-controller", _FIXED, switches=("--dry-run",))
    refuse_command(cmd, "remove-controller", _FIXED, "--controller-id",
                   "--controller-directory-id", switches=("--dry-run",))


def _check(args) -> None:
    check_refused(args)
    if args.status and args.replication:
        fail("Only one of --status or --replication should be specified with describe "
             "sub-command")
    if args.status and args.human_readable:
        fail("The option --human-readable is only supported along with --replication")
    if not args.status and not args.replication:
        fail("One of --status or --replication must be specified with describe sub-command")


async def describe_quorum(admin: Admin):
    """__cluster_metadata-0's partition data from any broker (Kafka's Admin.describeMetadataQuorum)."""
    _, conn = await admin.pool.any_connection()
    T = DescribeQuorumRequest.TopicData
    req = DescribeQuorumRequest(topics=[T(topic_name=METADATA_TOPIC, partitions=[
        T.PartitionData(partition_index=0)])])
    resp = await conn.request(req, admin.pool.version(conn, DescribeQuorumRequest))
    code = resp.error_code or resp.topics[0].partitions[0].error_code
    if code:
        raise for_code(code)(f"describe metadata quorum: "
                             f"{getattr(resp, 'error_message', None) or ''}".rstrip(": "))
    return resp.topics[0].partitions[0]


def _leader(q):
    found = [v for v in q.current_voters if v.replica_id == q.leader_id]
    if not found:
        fail(f"the quorum has no leader (leader id {q.leader_id}, epoch {q.leader_epoch})")
    return found[0]


def _node(r) -> str:
    return f'{{"id": {r.replica_id}, "directoryId": null}}'


async def _main(admin: Admin, args) -> None:
    q = await describe_quorum(admin)
    if args.status:
        cluster_id = (await admin.describe_cluster())["cluster_id"]
        _status(q, cluster_id)
    else:
        _replication(q, args.human_readable)


def _status(q, cluster_id: str) -> None:
    leader = _leader(q)
    lagging = min(q.current_voters, key=lambda v: v.log_end_offset)
    if lagging.replica_id == leader.replica_id:
        lag_ms = 0
    elif leader.last_caught_up_timestamp != -1 and lagging.last_caught_up_timestamp != -1:
        lag_ms = leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
    else:
        lag_ms = -1
    rows = [("ClusterId", cluster_id), ("LeaderId", q.leader_id),
            ("LeaderEpoch", q.leader_epoch), ("HighWatermark", q.high_watermark),
            ("MaxFollowerLag", leader.log_end_offset - lagging.log_end_offset),
            ("MaxFollowerLagTimeMs", lag_ms),
            ("CurrentVoters", f"[{', '.join(_node(v) for v in q.current_voters)}]"),
            ("CurrentObservers", f"[{', '.join(_node(o) for o in q.observers)}]")]
    for name, value in rows:
        print(f"{name + ':':<24}{value}")


def _when(ms: int, human: bool, what: str) -> str:
    if ms == -1 or not human:
        return str(ms)
    now = int(time.time() * 1000)
    if not 0 < ms <= now:
        fail(f"Error while computing relative time, possible drift in system clock. Current "
             f"timestamp is {now}, {what} timestamp is {ms}")
    return f"{now - ms} ms ago"


def _replication(q, human: bool) -> None:
    leader = _leader(q)
    groups = [([leader], "Leader"),
              ([v for v in q.current_voters if v.replica_id != leader.replica_id], "Follower"),
              (list(q.observers), "Observer")]
    rows = [(r.replica_id, ZERO_DIRECTORY_ID, r.log_end_offset,
             leader.log_end_offset - r.log_end_offset,
             _when(r.last_fetch_timestamp, human, "last fetch"),
             _when(r.last_caught_up_timestamp, human, "last caught up"), status)
            for replicas, status in groups for r in replicas]
    print_table(("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                 "LastCaughtUpTimestamp", "Status"), rows)
