"""ApiVersions (key 18), v0-4.

v1: throttle_time_ms.  v3: flexible, client software name/version (KIP-511); an unsupported
version is answered at v0 with UNSUPPORTED_VERSION and our ranges so the client can retry.
A client listener lists no inter-broker API (dispatch.INTER_BROKER_KEYS), as Kafka 4.
Not implemented: feature negotiation (supported/finalized features are empty).
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest

from minibroker.broker.dispatch import (
    RawResponse, RequestContext, api_versions_response, handles)
from minibroker.protocol.framing import frame_parts, response_header

# (version, the broker's table and its size, control plane) → encoded body
_cache: dict[tuple[int, int, int, bool], bytes] = {}


@handles(ApiKey.ApiVersions, ApiVersionsRequest, versions=(0, 4))
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> RawResponse:
    handlers = ctx.services.handlers    # HANDLERS, or an emulated release's (broker/releases.py)
    key = (ctx.api_version, id(handlers), len(handlers), ctx.control_plane)
    body = _cache.get(key)
    if body is None:
        body = _cache[key] = bytes(api_versions_response(0, ctx.control_plane, handlers).encode(
            version=ctx.api_version))
    # ApiVersions responses always use header v0 (KIP-511).
    return RawResponse(frame_parts([response_header(ctx.header.correlation_id, False), body]))
