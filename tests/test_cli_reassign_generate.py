"""reassign-partitions --generate and --list, in Kafka's formats; the plan --generate proposes
is accepted by --execute and completes."""
from __future__ import annotations

import json
import time

import pytest

from serve_helpers import run_main
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]


def run(capsys, cluster, *argv: str) -> tuple[int, str, str]:
    return run_main(capsys, "reassign-partitions", "--bootstrap-server", cluster.bootstrap,
                    *argv)


def test_generate_then_execute(capsys, tmp_path):
    with ThreadedCluster(brokers=3) as c:
        c.create_topic("mv", 4, 2)
        move = tmp_path / "move.json"
        move.write_text(json.dumps({"version": 1, "topics": [{"topic": "mv"}]}))
        code, out, err = run(capsys, c, "--generate", "--topics-to-move-json-file", str(move),
                             "--broker-list", "2,3")
        lines = out.splitlines()
        assert code == 0 and lines[0] == "Current partition replica assignment", err
        assert lines[3] == "Proposed partition reassignment configuration"
        current, proposed = json.loads(lines[1]), json.loads(lines[4])
        assert [p["partition"] for p in current["partitions"]] == [0, 1, 2, 3]
        assert all(sorted(p["replicas"]) == [2, 3] and p["log_dirs"] == ["any", "any"]
                   for p in proposed["partitions"])
        plan = tmp_path / "plan.json"
        plan.write_text(lines[4])
        assert run(capsys, c, "--execute", "--reassignment-json-file", str(plan))[0] == 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = run(capsys, c, "--verify", "--reassignment-json-file", str(plan))[1]
            if "still in progress" not in out:
                break
            time.sleep(0.2)
        assert out.count("is completed.") == 4, out
        assert run(capsys, c, "--list")[1] == "No partition reassignments found.\n"
        code, _, err = run(capsys, c, "--generate", "--topics-to-move-json-file", str(move),
                           "--broker-list", "2,9")
        assert code == 1 and "Unknown broker id(s) in --broker-list: 9" in err
        code, _, err = run(capsys, c, "--execute", "--reassignment-json-file", str(plan),
                           "--replica-alter-log-dirs-throttle", "100")
        assert code == 2 and "one log directory each" in err
