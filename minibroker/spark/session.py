"""A correctly configured local SparkSession for tests, examples and benchmarks.

Two settings are not optional on a machine like CI's (measured, see the README's Spark section):
- the workers' Python is this interpreter (`PYSPARK_PYTHON`): otherwise Spark starts the system
  `python3`, which lacks pyarrow, and every Python data source task fails;
- everything binds to loopback (`SPARK_LOCAL_IP`, `spark.driver.host`, `spark.driver.bindAddress`):
  otherwise Spark binds to the first non-loopback interface.
The UI is off and `spark.jars.packages` is never set (it resolves from Maven, unreachable here).
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from pyspark.sql import SparkSession

from minibroker.spark import register

LOOPBACK = "127.0.0.1"


def _settings() -> dict[str, str]:
    """Environment the JVM and the Python workers it starts need."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": LOOPBACK,
            # workers import minibroker from where this process does (a checkout, a worktree)
            "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


@contextlib.contextmanager
def _environment(settings: dict[str, str]):
    """Set `settings` while the JVM starts (it keeps them for the workers it launches), then put
    this process's environment back: later subprocesses of the caller are not Spark's business."""
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def local_session(master: str = "local[2]", app_name: str = "minibroker", *,
                  conf: dict[str, Any] | None = None, shuffle_partitions: int = 4):
    """getOrCreate a SparkSession on `master` bound to loopback, with minibroker registered."""
    env = _settings()

    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.driver.host", LOOPBACK)
         .config("spark.driver.bindAddress", LOOPBACK)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
         .config("spark.pyspark.python", sys.executable)
         .config("spark.pyspark.driver.python", sys.executable)
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
         .config("spark.executorEnv.PYTHONPATH", env["PYTHONPATH"])
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.sql.session.timeZone", "UTC"))
    for k, v in (conf or {}).items():
        if k == "spark.jars.packages":
            raise ValueError("spark.jars.packages resolves from Maven, which minibroker never needs")
        b = b.config(k, str(v))
    with _environment(env):
        spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
