"""Run ../shared/perf/load.py with every CreateTopics asking for replication factor $MB_PERF_RF.

load.py creates its topics with RF 1; benchmarks/run.py passes this file as anchor.py's --python
(through _python_rf.sh) for the replication-3 row, so the same load runs against replicated topics.
Usage (what anchor.py runs): _python_rf.sh .../load.py BOOTSTRAP [load.py args]
"""
import os
import runpy
import sys

import confluent_kafka.admin as admin

RF = int(os.environ.get("MB_PERF_RF", "1"))
_NewTopic = admin.NewTopic


def NewTopic(topic, num_partitions=-1, replication_factor=-1, *args, **kw):  # noqa: N802
    return _NewTopic(topic, num_partitions, RF, *args, **kw)


admin.NewTopic = NewTopic
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
