"""A correctly configured local SparkSession for tests, examples and benchmarks.

Two settings are not optional on a machine like CI's (measured, see the README's Spark section):
- the workers' Python is this interpreter (`PYSPARK_PYTHON`): otherwise Spark starts the system
  `python3`, which lacks pyarrow, and every Python data source task fails;
- everything binds to loopback (`SPARK_LOCAL_IP`, `spark.driver.host`, `spark.driver.bindAddress`):
  otherwise Spark binds to the first non-loopback interface.
The UI is off and `spark.jars.packages` is never set (it resolves from Maven, unreachable here).
"""
from __future__ import annotations

import os
import sys
from typing import Any

LOOPBACK = "127.0.0.1"


def prepare_environment() -> None:
    """Environment the JVM and its Python workers inherit; call before the first session."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    # Workers must import minibroker from wherever this process does (a worktree on PYTHONPATH).
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    extra = [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(extra + [p for p in paths if "site-packages" not in p]))


def local_session(master: str = "local[2]", app_name: str = "minibroker", *,
                  conf: dict[str, Any] | None = None, shuffle_partitions: int = 4):
    """getOrCreate a SparkSession on `master` bound to loopback, with minibroker registered."""
    prepare_environment()
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.driver.host", LOOPBACK)
         .config("spark.driver.bindAddress", LOOPBACK)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
         .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
         .config("spark.sql.session.timeZone", "UTC"))
    for k, v in (conf or {}).items():
        if k == "spark.jars.packages":
            raise ValueError("spark.jars.packages resolves from Maven, which minibroker never needs")
        b = b.config(k, str(v))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from minibroker.spark import register
    register(spark)
    return spark
