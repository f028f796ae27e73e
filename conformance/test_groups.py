"""Server-side consumer groups (the classic protocol) through real clients.

1. Against the served cluster (``cluster`` fixture), for kafka-python, aiokafka, confluent-kafka
   (``group.protocol=classic``), kafkajs (one node process driving three members) and
   minibroker.client, on a 6-partition topic:

   a. three members join one group; once their rebalance callbacks report a stable assignment
      (every partition owned by exactly one member, and DescribeGroups agrees: Stable, the same
      three partition sets) two batches are produced, and every record is consumed exactly once,
      by the member owning its partition. Members commit each batch synchronously; the third
      member stops committing before the second batch.
   b. the third member leaves (close: LeaveGroup, no commit). The other two rebalance to a stable
      3+3 assignment; a third batch is produced. Every record of batches 1-3 is consumed at least
      once; a record is consumed again only if no commit covering it had succeeded before, and
      after the leave every partition resumes exactly at the group's last commit (so the leaving
      member's uncommitted records, and only those, are redelivered).
   c. the last members close; the group's committed offsets (OffsetFetch) equal the log ends; a
      fourth batch is produced and a new member starts exactly at the committed offsets and reads
      exactly the fourth batch.
   d. once it has left too, ListGroups shows the group Empty and DeleteGroups removes it with its
      offsets.

2. The group coordinator's broker is stopped (in-process ``ThreadedCluster``; kafka-python and
   librdkafka): FindCoordinator moves to the new leader of the group's ``__consumer_offsets``
   partition, the committed offsets read back unchanged from it, and the running members keep
   consuming and committing what is produced afterwards.

Every wait is bounded. See SKIPPED.md for what is left out.
"""
from __future__ import annotations

import base64
import importlib
import zlib
from collections import defaultdict

import pytest

from conformance import checks
from conformance.drivers import load
from conformance.drivers._group import Trace, wait_until

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 6
BATCH = 240                   # records per batch, 4 batches per scenario
MEMBERS = 3
STEP_TIMEOUT = 30.0           # bound on each wait (join, consume, rebalance)
IO_TIMEOUT = 30.0
GROUP_CLIENTS = ("kafka_python", "aiokafka", "confluent", "kafkajs", "minibroker_client")


def _driver(name):
    # minibroker.client is not in drivers.CLIENTS (test_clients' matrix); import it directly
    d = importlib.import_module(f"conformance.drivers.{name}")
    why = d.available() if hasattr(d, "available") else None
    if why:
        pytest.fail(f"{name}: {why}")
    return d


def _batches(client: str, n: int = 4):
    seed = zlib.crc32(f"groups/{client}".encode())
    records = checks.make_records(BATCH * n, seed)
    return [records[i * BATCH:(i + 1) * BATCH] for i in range(n)]


# --------------------------------------------------------------------------------- checks
def _check_partitioning(assignment: dict[str, list[int]], n_members: int, what: str) -> None:
    assert len(assignment) == n_members, f"{what}: members {assignment}"
    owned = sorted(p for parts in assignment.values() for p in parts)
    assert owned == list(range(PARTITIONS)), f"{what}: partitions not owned exactly once: " \
                                              f"{assignment}"
    assert all(assignment.values()), f"{what}: a member owns nothing: {assignment}"


def _check_described(group: dict, assignment: dict[str, list[int]], what: str) -> None:
    assert group["state"] == "Stable", f"{what}: DescribeGroups says {group}"
    assert sorted(map(sorted, group["members"].values())) == \
        sorted(map(sorted, assignment.values())), \
        f"{what}: DescribeGroups {group['members']} vs callbacks {assignment}"


def _stable(members, baseline: dict[str, int] | None = None):
    """{name: partitions} when the members' callbacks show one owner per partition (each member
    having been assigned since ``baseline``), else None."""
    cur = {m.name: sorted(m.current) for m in members}
    if baseline and any(m.assign_count <= baseline[m.name] for m in members):
        return None
    owned = sorted(p for ps in cur.values() for p in ps)
    if owned != list(range(PARTITIONS)) or not all(cur.values()):
        return None
    return cur


def check_scenario(t: dict) -> None:
    """The scenario's invariants, on the normalised trace (see ``run_python_scenario``)."""
    batches, produced = t["records"], t["produced"]
    consumed = t["consumed"]            # [(seq, member, p, o, key, value)] in seq order
    commits = t["commits"]              # [(seq, member, {p: next offset})]
    leave_seq, left = t["leave_seq"], t["left"]
    at: dict[tuple[int, int], tuple] = {}
    for b, (recs, pos) in enumerate(zip(batches, produced)):
        assert len(pos) == len(recs), f"batch {b}: {len(pos)} acks for {len(recs)} records"
        for (k, v), (p, o) in zip(recs, pos):
            at[(p, o)] = (k, v, b)
    for _, m, p, o, k, v in consumed:
        assert (p, o) in at, f"{m} consumed ({p}, {o}), which was never produced"
        assert at[(p, o)][:2] == (k, v), f"{m}: ({p}, {o}) holds other bytes"

    # a. three members, every partition owned once; batches 0 and 1 consumed exactly once, by
    # the owner, before the leave.
    _check_partitioning(t["stable_a"], MEMBERS, "3 members")
    _check_described(t["group_a"], t["stable_a"], "3 members")
    owner = {p: m for m, ps in t["stable_a"].items() for p in ps}
    before = [(m, p, o) for s, m, p, o, _, _ in consumed if s < leave_seq]
    want = sorted(pos for b in (0, 1) for pos in produced[b])
    assert sorted((p, o) for _, p, o in before) == want, \
        "before the leave, batches 1-2 were not each consumed exactly once"
    wrong = [(m, p, o) for m, p, o in before if owner[p] != m]
    assert not wrong, f"records consumed by a member not owning their partition: {wrong[:5]}"

    # b. after the leave: two members own everything once; all of batches 0-2 consumed; any
    # record consumed twice was not covered by a commit that had succeeded before.
    stable_b = t["stable_b"]
    assert left not in stable_b
    _check_partitioning(stable_b, MEMBERS - 1, "after the leave")
    _check_described(t["group_b"], stable_b, "after the leave")
    new_seq = t["new_seq"]
    upto_c = [c for c in consumed if c[0] < new_seq]
    seen = {(p, o) for _, _, p, o, _, _ in upto_c}
    lost = [pos for b in (0, 1, 2) for pos in produced[b] if pos not in seen]
    assert not lost, f"{len(lost)} records never consumed, first {lost[:5]}"

    commit_log = defaultdict(list)       # p -> [(seq, offset)]
    for s, _, offs in commits:
        for p, o in offs.items():
            commit_log[p].append((s, o))
    first_seen: dict[tuple[int, int], str] = {}
    dups = []
    for s, m, p, o, _, _ in upto_c:
        if (p, o) not in first_seen:
            first_seen[(p, o)] = m
            continue
        covered = max((co for cs, co in commit_log[p] if cs < s), default=0)
        assert o >= covered, (f"{m} got ({p}, {o}) again although offset {covered} had been "
                              f"committed for partition {p} before")
        dups.append((p, o))
    assert len(dups) == len(set(dups)), "a record was redelivered more than once"

    # Every partition resumes after the leave exactly at the last commit made before it.
    last_commit = {p: max((o for cs, o in commit_log[p] if cs < leave_seq), default=0)
                   for p in range(PARTITIONS)}
    resumed = {}
    for s, m, p, o, _, _ in upto_c:
        if s > leave_seq and p not in resumed:
            resumed[p] = o
    assert resumed == {p: last_commit[p] for p in resumed}, \
        f"after the leave, partitions resumed at {resumed}, last commits {last_commit}"
    # The leaving member's uncommitted records were redelivered; nothing else was.
    uncommitted = {(p, o) for s, m, p, o, _, _ in upto_c
                   if m == left and s < leave_seq and o >= last_commit[p]}
    assert uncommitted, "the leaving member had no uncommitted records (scenario did not test it)"
    assert set(dups) == uncommitted, (f"redelivered {sorted(set(dups))[:10]}..., the leaving "
                                      f"member's uncommitted records {sorted(uncommitted)[:10]}...")

    # c. committed offsets are the log ends, and a new member starts exactly there.
    ends = t["ends_before_new"]
    assert t["committed_before_new"] == ends, \
        f"committed {t['committed_before_new']} != log ends {ends}"
    new = [(p, o) for s, m, p, o, _, _ in consumed if s > new_seq]
    assert sorted(new) == sorted(produced[3]), \
        f"the new member read {len(new)} records, batch 4 has {len(produced[3])}"
    first_new = {}
    for p, o in new:
        first_new.setdefault(p, o)
    assert first_new == {p: ends[p] for p in first_new}, \
        f"new member started at {first_new}, committed {ends}"
    assert sorted(t["new_assignment"]) == list(range(PARTITIONS))


# --------------------------------------------------------------------------------- Python clients
def run_python_scenario(d, bs: str, topic: str, group: str, batches) -> dict:
    kp = load("kafka_python")
    trace = Trace()
    out: dict = {"records": batches, "produced": []}
    members = [d.GroupMember(bs, topic, group, f"m{i}", trace).start() for i in range(MEMBERS)]
    everyone = list(members)

    def consumed_positions():
        with trace.lock:
            return {(p, o) for _, _, p, o, _, _ in trace.consumed}

    def consumed_all(batch_ids):
        want = {pos for b in batch_ids for pos in out["produced"][b]}
        return lambda: want <= consumed_positions()

    def committed_all(ms, ends):
        names = {m.name for m in ms}

        def pred():
            with trace.lock:
                got = {}
                for _, m, offs in trace.commits:
                    if m in names:
                        for p, o in offs.items():
                            got[p] = max(got.get(p, 0), o)
            owned = {p for m in ms for p in m.current}
            return all(got.get(p, 0) == ends[p] for p in owned)
        return pred

    def stable_and_described(ms, baseline=None):
        def pred():
            cur = _stable(ms, baseline)
            if cur is None:
                return None
            g = kp.describe_group(bs, group, timeout=IO_TIMEOUT)
            if g["state"] != "Stable" or len(g["members"]) != len(ms):
                return None
            return cur, g
        return wait_until(pred, STEP_TIMEOUT, f"a stable {len(ms)}-member assignment",
                          interval=0.2, members=ms)

    def produce(b):
        out["produced"].append(d.produce(bs, topic, batches[b], "none", timeout=IO_TIMEOUT))

    def ends():
        return {p: hi for p, (_, hi) in kp.list_offsets(bs, topic, timeout=IO_TIMEOUT).items()}

    try:
        out["stable_a"], out["group_a"] = stable_and_described(members)
        produce(0)
        wait_until(consumed_all([0]), STEP_TIMEOUT, "batch 1 consumed", members=members)
        wait_until(committed_all(members, ends()), STEP_TIMEOUT, "batch 1 committed",
                   members=members)
        leaver, stay = members[2], members[:2]
        leaver.commit_enabled = False
        produce(1)
        wait_until(consumed_all([0, 1]), STEP_TIMEOUT, "batch 2 consumed", members=members)
        wait_until(committed_all(stay, ends()), STEP_TIMEOUT, "batch 2 committed by members 1-2",
                   members=stay)
        baseline = {m.name: m.assign_count for m in stay}
        with trace.lock:
            out["leave_seq"] = next(trace.seq)
        out["left"] = leaver.name
        leaver.close()
        out["stable_b"], out["group_b"] = stable_and_described(stay, baseline)
        produce(2)
        wait_until(consumed_all([0, 1, 2]), STEP_TIMEOUT, "batches 1-3 consumed", members=stay)
        e = ends()
        wait_until(committed_all(stay, e), STEP_TIMEOUT, "batch 3 committed", members=stay)
        for m in stay:
            m.close()
        out["ends_before_new"] = e
        out["committed_before_new"] = kp.committed_offsets(bs, group, topic, timeout=IO_TIMEOUT)
        produce(3)
        with trace.lock:
            out["new_seq"] = next(trace.seq)
        new = d.GroupMember(bs, topic, group, "m3", trace).start()
        everyone.append(new)
        wait_until(consumed_all([3]), STEP_TIMEOUT, "batch 4 consumed by the new member",
                   members=[new])
        out["new_assignment"] = sorted(new.current)
        new.close()
    finally:
        for m in everyone:
            try:
                m.close(timeout=15)
            except TimeoutError:
                pass
    with trace.lock:
        out["consumed"] = sorted(trace.consumed)
        out["commits"] = sorted(trace.commits, key=lambda c: c[0])
        out["rebalances"] = list(trace.rebalances)
        out["errors"] = list(trace.errors)
    return out


def run_kafkajs_scenario(d, bs: str, topic: str, group: str, batches) -> dict:
    res = d.group_scenario(bs, topic, group, batches, members=MEMBERS,
                           step_timeout=STEP_TIMEOUT, timeout=100)
    unb = base64.b64decode
    res["records"] = batches
    res["consumed"] = [(s, m, p, o, unb(k) if k is not None else None,
                        unb(v) if v is not None else None)
                       for s, m, p, o, k, v in res["consumed"]]
    res["commits"] = [(s, m, {int(p): o for p, o in offs.items()}) for s, m, offs in res["commits"]]
    res["produced"] = [[tuple(x) for x in b] for b in res["produced"]]
    for k in ("ends_before_new", "committed_before_new"):
        res[k] = {int(p): o for p, o in res[k].items()}
    return res


@pytest.mark.parametrize("client", GROUP_CLIENTS)
def test_group_shares_rebalances_and_resumes_at_commits(cluster, client):
    d = _driver(client)
    bs = cluster.bootstrap
    topic = cluster.topic_name(f"groups-{client}")
    group = f"{topic}-group"
    admin = d if getattr(d, "HAS_ADMIN", False) else load("kafka_python")
    admin.create_topic(bs, topic, PARTITIONS, cluster.replication, timeout=IO_TIMEOUT)
    batches = _batches(client)
    run = run_kafkajs_scenario if client == "kafkajs" else run_python_scenario
    trace = run(d, bs, topic, group, batches)
    check_scenario(trace)

    # Every member has left: ListGroups shows the group Empty, DeleteGroups removes it and its
    # offsets (kafka-python's admin client, whichever client ran the group).
    kp = load("kafka_python")
    assert kp.list_groups(bs, timeout=IO_TIMEOUT).get(group) == ("Empty", "consumer")
    assert kp.delete_groups(bs, [group], timeout=IO_TIMEOUT) == {group: "OK"}
    assert group not in kp.list_groups(bs, timeout=IO_TIMEOUT)
    assert kp.committed_offsets(bs, group, topic, timeout=IO_TIMEOUT) == {}


# --------------------------------------------------------------------------------- coordinator stop
FAILOVER_CLIENTS = ("kafka_python", "confluent")


@pytest.mark.fault
@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", FAILOVER_CLIENTS)
def test_group_survives_its_coordinator_stopping(client):
    from minibroker.coordinator.offsets import OFFSETS_TOPIC, partition_for
    from minibroker.testing import ThreadedCluster

    d = _driver(client)
    kp = load("kafka_python")
    topic, group = f"conf-groups-failover-{client}", f"conf-groups-failover-{client}-group"
    batches = _batches(f"failover/{client}", 2)
    trace = Trace()
    with ThreadedCluster(brokers=3, group_initial_rebalance_delay_ms=0) as tc:
        tc.create_topic(topic, PARTITIONS, 3)
        members = [d.GroupMember(tc.bootstrap, topic, group, f"m{i}", trace).start()
                   for i in range(2)]
        try:
            stable = wait_until(lambda: _stable(members), STEP_TIMEOUT, "a stable assignment",
                                members=members)
            _check_partitioning(stable, 2, "2 members")
            produced = [d.produce(tc.bootstrap, topic, batches[0], "none", timeout=IO_TIMEOUT)]

            def consumed():
                with trace.lock:
                    return {(p, o) for _, _, p, o, _, _ in trace.consumed}

            def committed_ends(bs):
                try:
                    ends = {p: hi for p, (_, hi) in
                            kp.list_offsets(bs, topic, timeout=IO_TIMEOUT).items()}
                    got = kp.committed_offsets(bs, group, topic, timeout=IO_TIMEOUT)
                except Exception:  # noqa: BLE001 — coordinator moving / loading: ask again
                    return None
                return got if got == ends else None

            wait_until(lambda: set(produced[0]) <= consumed(), STEP_TIMEOUT, "batch 1 consumed",
                       members=members)
            before = wait_until(lambda: committed_ends(tc.bootstrap), STEP_TIMEOUT,
                                "batch 1 committed")

            coord = kp.find_coordinator(tc.bootstrap, group, timeout=IO_TIMEOUT)
            n_offsets = tc.cluster.config.offsets_topic_num_partitions
            assert coord == tc.leader_of(OFFSETS_TOPIC, partition_for(group, n_offsets))
            tc.stop_broker(coord)            # tc.bootstrap now lists the live brokers only

            def moved():
                try:
                    c = kp.find_coordinator(tc.bootstrap, group, timeout=IO_TIMEOUT)
                except Exception:  # noqa: BLE001 — not elected yet
                    return None
                return c if c != coord else None
            new_coord = wait_until(moved, STEP_TIMEOUT, "a new coordinator")
            assert new_coord == tc.leader_of(OFFSETS_TOPIC, partition_for(group, n_offsets))
            after = wait_until(
                lambda: _safe(kp.committed_offsets, tc.bootstrap, group, topic, IO_TIMEOUT),
                STEP_TIMEOUT, "committed offsets from the new coordinator")
            assert after == before, f"committed offsets changed: {before} -> {after}"

            produced.append(d.produce(tc.bootstrap, topic, batches[1], "none",
                                      timeout=IO_TIMEOUT))
            want = set(produced[0]) | set(produced[1])
            wait_until(lambda: want <= consumed(), STEP_TIMEOUT,
                       "batch 2 consumed after the coordinator stopped", members=members)
            wait_until(lambda: committed_ends(tc.bootstrap), STEP_TIMEOUT,
                       "batch 2 committed to the new coordinator")
            g = kp.describe_group(tc.bootstrap, group, timeout=IO_TIMEOUT)
            assert g["state"] == "Stable" and len(g["members"]) == 2, g
        finally:
            for m in members:
                try:
                    m.close(timeout=15)
                except TimeoutError:
                    pass
    # Nothing from batch 1 (all committed before the stop) was consumed again; batch 2 at least
    # once, byte-exact.
    recs = {pos: r for b in (0, 1) for pos, r in zip(produced[b], batches[b])}
    with trace.lock:
        got = list(trace.consumed)
    for _, m, p, o, k, v in got:
        assert recs.get((p, o)) == (k, v), f"{m}: ({p}, {o}) holds other bytes"
    first = [(p, o) for _, _, p, o, _, _ in got if (p, o) in set(produced[0])]
    assert sorted(first) == sorted(produced[0]), "batch 1 records consumed more than once"


def _safe(fn, *args):
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 — retried by the caller's bounded wait
        return None
