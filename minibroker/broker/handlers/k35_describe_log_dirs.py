"""DescribeLogDirs (key 35), v0-4.

One log dir, "/minibroker/data" (logs live in memory), holding every partition this broker hosts,
each with the bytes its log holds (ReplicaManager.log_sizes); offset_lag 0 and is_future_key
false (no future replicas, as when no AlterReplicaLogDirs is in progress). topics null: all
partitions; else only the listed ones hosted here.
v1: throttle_time_ms.  v2: flexible.  v3: top-level error_code.  v4: total/usable bytes (-1,
unknown: memory is not a volume).
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import by_topic

_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Part = _Topic.DescribeLogDirsPartition
LOG_DIR = "/minibroker/data"


@handles(ApiKey.DescribeLogDirs, DescribeLogDirsRequest, versions=(0, 4))
async def handle_describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest
        ) -> DescribeLogDirsResponse:
    wanted = None if req.topics is None else \
        {(t.topic, p) for t in req.topics for p in t.partitions}
    result = _Result(error_code=0, log_dir=LOG_DIR, total_bytes=-1, usable_bytes=-1, topics=by_topic(
        ((topic, _Part(partition_index=partition, partition_size=size, offset_lag=0,
                       is_future_key=False))
         for topic, partition, size in ctx.replica_manager.log_sizes(wanted)), _Topic))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result])
