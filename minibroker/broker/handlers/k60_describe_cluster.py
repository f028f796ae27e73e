"""DescribeCluster (key 60), v0-2.

Brokers, cluster id and controller id from this broker's metadata cache (as Metadata answers
them). v0: flexible from the start.  v1: endpoint_type — only 1 (brokers); 2 (controllers) is
MISMATCHED_ENDPOINT_TYPE, since our controller has no listener of its own.
include_cluster_authorized_operations: every cluster operation while there are no ACLs
(broker/acl_operations.py), else -2^31.  v2: include_fenced_brokers, is_fenced — the metadata
cache holds the unfenced brokers only, so every broker listed is unfenced.
"""
from __future__ import annotations

from kafka.errors import MismatchedEndpointTypeError, UnsupportedEndpointTypeError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from minibroker.broker import acl_operations
from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.security.acl import CLUSTER_NAME

_Broker = DescribeClusterResponse.DescribeClusterBroker
BROKERS, CONTROLLERS = 1, 2


@handles(ApiKey.DescribeCluster, DescribeClusterRequest, versions=(0, 2))
async def handle_describe_cluster(ctx: RequestContext, req: DescribeClusterRequest
        ) -> DescribeClusterResponse:
    cache = ctx.metadata
    endpoint_type = req.endpoint_type if ctx.api_version >= 1 else BROKERS
    if endpoint_type != BROKERS:
        code, message = ((MismatchedEndpointTypeError.errno,
                          "The request was sent to an endpoint of type BROKER, but we wanted an "
                          "endpoint of type CONTROLLER") if endpoint_type == CONTROLLERS else
                         (UnsupportedEndpointTypeError.errno,
                          f"Unsupported endpoint type {endpoint_type}"))
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=code, error_message=message,
            endpoint_type=endpoint_type, cluster_id="", controller_id=-1, brokers=[],
            authorized_operations=acl_operations.OMITTED)
    brokers = [_Broker(broker_id=b.node_id, host=host, port=port, rack=b.rack, is_fenced=False)
               for b in cache.alive_brokers() for host, port in (b.address(ctx.listener),)]
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=BROKERS,
        cluster_id=cache.cluster_id or "", controller_id=cache.controller_id, brokers=brokers,
        authorized_operations=acl_operations.authorized(
            ctx, 4, CLUSTER_NAME, bool(req.include_cluster_authorized_operations)))
