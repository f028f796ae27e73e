"""`minibroker --version` loads neither the broker nor kafka-python; `import minibroker` loads
Cluster only when it is used (PEP 562)."""
from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_version_loads_no_broker_and_no_kafka_python():
    r = _run("import sys, runpy; sys.argv = ['minibroker', '--version']\n"
             "try:\n    runpy.run_module('minibroker', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'kafka' or "
             "m in ('minibroker.cluster', 'minibroker.broker'))\n"
             "print(loaded)")
    assert r.returncode == 0, r.stderr
    first, loaded = r.stdout.splitlines()
    assert first.startswith("minibroker ") and loaded == "[]"


def test_cluster_loads_on_first_use():
    r = _run("import sys, minibroker; before = 'minibroker.cluster' in sys.modules\n"
             "from minibroker import Cluster; print(before, Cluster.__module__)")
    assert (r.returncode, r.stdout) == (0, "False minibroker.cluster\n"), r.stderr
