"""DescribeLogDirs (key 35), v0-4.

One log dir, "/minibroker/data" (logs live in memory), holding every partition this broker hosts,
each with its size in bytes (PartitionLog.size_bytes); offset_lag 0 and is_future_key false (no
future replicas, as when no AlterReplicaLogDirs is in progress). topics null: all partitions; else
only the listed ones hosted here.
v1: throttle_time_ms.  v2: flexible.  v3: top-level error_code.  v4: total/usable bytes (-1,
unknown: memory is not a volume).
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from minibroker.broker.dispatch import RequestContext, handles

_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Part = _Topic.DescribeLogDirsPartition
LOG_DIR = "/minibroker/data"


@handles(ApiKey.DescribeLogDirs, DescribeLogDirsRequest, versions=(0, 4))
async def handle_describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest):
    hosted = ctx.broker.replica_manager.partitions
    if req.topics is None:
        keys = sorted(hosted)
    else:
        keys = sorted({(t.topic, p) for t in req.topics for p in t.partitions} & set(hosted))
    by_topic: dict[str, list] = {}
    for topic, partition in keys:
        log = hosted[(topic, partition)].log
        by_topic.setdefault(topic, []).append(_Part(
            partition_index=partition, partition_size=log.size_bytes, offset_lag=0,
            is_future_key=False))
    result = _Result(error_code=0, log_dir=LOG_DIR, total_bytes=-1, usable_bytes=-1,
                     topics=[_Topic(name=n, partitions=ps) for n, ps in by_topic.items()])
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result])
