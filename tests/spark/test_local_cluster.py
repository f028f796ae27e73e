"""The source on `local-cluster[2,1,1024]`: a standalone master, two workers and executors in their
own JVMs (with their own Python workers), so readers and partitions must travel pickled and hold
nothing of the driver.  A separate process: one JVM (one SparkContext) per process, and the
test run's shared `local[2]` session stays up.  The process starts with the first Spark test
(conftest's `local_cluster_job`) and is awaited here, last."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from spark_helpers import produce

pytestmark = pytest.mark.timeout(600)

SCRIPT = r'''
import sys, time
from minibroker.spark.session import local_session
spark = local_session("local-cluster[2,1,1024]", "minibroker-local-cluster")
sc = spark.sparkContext
deadline = time.monotonic() + 300
while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < 2 and time.monotonic() < deadline:
    time.sleep(1)
executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1
df = (spark.read.format("minibroker").option("kafka.bootstrap.servers", sys.argv[1])
      .option("subscribe", "cluster3").option("maxRecordsPerPartition", 500).load())
rows = df.select("partition", "offset", "value").collect()
print("RESULT", executors, len(rows), len({(r.partition, r.offset) for r in rows}),
      len({bytes(r.value) for r in rows}), flush=True)
spark.stop()
'''


def start_local_cluster_job(kafka) -> subprocess.Popen:
    """Produce the topic and start the local-cluster process; conftest calls this when the first
    Spark test starts and this module's test runs last, so the executors' JVM start-up (~90 s on
    the loaded machine) overlaps the other Spark tests."""
    kafka.call(kafka.cluster.create_topic, "cluster3", 3, 2)
    produce(kafka.bootstrap, "cluster3", [(b"k%d" % (i % 13), b"%d" % i, None, None)
                                          for i in range(3000)])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    work = tempfile.mkdtemp(prefix="local-cluster-")
    # output to files: a pipe nobody reads while other tests run could fill and block Spark
    with open(os.path.join(work, "out"), "w") as out, open(os.path.join(work, "err"), "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, kafka.bootstrap], stdout=out,
                                stderr=err, text=True, env=env, cwd=work)
    proc.work = work
    return proc


def test_source_on_local_cluster_with_two_executor_jvms(local_cluster_job):
    try:
        local_cluster_job.wait(timeout=540)
    finally:
        local_cluster_job.kill()
    out, err = (open(os.path.join(local_cluster_job.work, f)).read() for f in ("out", "err"))
    result = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert local_cluster_job.returncode == 0 and result, (out[-2000:], err[-3000:])
    assert result[0].split()[1:] == ["2", "3000", "3000", "3000"]
