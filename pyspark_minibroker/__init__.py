"""Spark's automatic Python data source discovery imports top-level `pyspark_*` modules and
registers their `DefaultSource`: with minibroker installed, `format("minibroker")` works without
`minibroker.spark.register(spark)`."""
from minibroker.spark.source import MinibrokerDataSource as DefaultSource

__all__ = ["DefaultSource"]
