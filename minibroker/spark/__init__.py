"""minibroker's Spark connector (optional extra `minibroker[spark]`): a Kafka-protocol source and
sink for PySpark's Python Data Source API, with KIP-253 ordered delivery, and the per-key ordering
checker as a Spark job.

    from minibroker.spark.session import local_session
    spark = local_session()                       # registers format("minibroker")
    df = (spark.read.format("minibroker").option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders").load())

`register(spark)` registers the data source on a session built elsewhere; with the package
installed, Spark also finds it without the call (the `pyspark_minibroker` module).
"""
from __future__ import annotations

__all__ = ["register", "MinibrokerDataSource"]


def register(spark) -> None:
    """Make `format("minibroker")` available on `spark` (idempotent)."""
    from minibroker.spark.source import MinibrokerDataSource, install_save_mode
    spark.dataSource.register(MinibrokerDataSource)
    install_save_mode()                 # save() with no mode appends, as Spark's Kafka sink


def __getattr__(name: str):
    if name == "MinibrokerDataSource":
        from minibroker.spark.source import MinibrokerDataSource
        return MinibrokerDataSource
    raise AttributeError(name)
