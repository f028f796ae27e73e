"""`df.write.format("minibroker").save()` with no mode, as Spark's Kafka sink accepts it.

Spark's Kafka sink (a V1 relation provider) accepts the default mode, ErrorIfExists, and Append,
and refuses Overwrite and Ignore. A Python data source is a V2 source, for which Spark refuses
ErrorIfExists before the source sees the write (UNSUPPORTED_DATA_SOURCE_SAVE_MODE). So, once
`minibroker.spark.register` ran in the driver, a DataFrameWriter whose format is "minibroker"
starts in Append mode; an explicit mode() afterwards still wins (Overwrite is then refused by the
sink with a message saying why).
"""
from __future__ import annotations

from pyspark.sql.readwriter import DataFrameWriter

_PATCHED = "_minibroker_default_append"


def install() -> None:
    if getattr(DataFrameWriter, _PATCHED, False):
        return
    original_format, original_save = DataFrameWriter.format, DataFrameWriter.save

    def format(self, source: str):
        out = original_format(self, source)
        if str(source).lower() == "minibroker":
            self.mode("append")
        return out

    def save(self, path=None, format=None, mode=None, partitionBy=None, **options):
        if format is not None and str(format).lower() == "minibroker" and mode is None:
            mode = "append"
        return original_save(self, path, format, mode, partitionBy, **options)

    format.__doc__, save.__doc__ = original_format.__doc__, original_save.__doc__
    DataFrameWriter.format, DataFrameWriter.save = format, save
    setattr(DataFrameWriter, _PATCHED, True)
