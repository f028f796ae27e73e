"""The source on `local-cluster[2,1,1024]`: a standalone master, two workers and executors in their
own JVMs (with their own Python workers), so readers and partitions must travel pickled and hold
nothing of the driver.  A separate process: one JVM (one SparkContext) per process, and the
test run's shared `local[2]` session stays up."""
from __future__ import annotations

import os
import subprocess
import sys

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


def test_source_on_local_cluster_with_two_executor_jvms(kafka, tmp_path):
    kafka.call(kafka.cluster.create_topic, "cluster3", 3, 2)
    produce(kafka.bootstrap, "cluster3", [(b"k%d" % (i % 13), b"%d" % i, None, None)
                                          for i in range(3000)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    r = subprocess.run([sys.executable, "-c", SCRIPT, kafka.bootstrap], capture_output=True,
                       text=True, timeout=540, env=env, cwd=tmp_path)
    result = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and result, (r.stdout[-2000:], r.stderr[-3000:])
    assert result[0].split()[1:] == ["2", "3000", "3000", "3000"]
