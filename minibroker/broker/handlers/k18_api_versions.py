"""ApiVersions (key 18), v0-4.

v1: throttle_time_ms.  v3: flexible, client software name/version (KIP-511); an unsupported
version is answered at v0 with UNSUPPORTED_VERSION and our ranges so the client can retry.
Not implemented: feature negotiation (supported/finalized features are empty).
"""
from __future__ import annotations

from kafka.errors import UnsupportedVersionError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from minibroker.broker.dispatch import (
    HANDLERS, RawResponse, RequestContext, encode_response, handles, supported_versions)
from minibroker.protocol.framing import frame_parts, response_header

_cache: dict[tuple[int, int], bytes] = {}     # (version, number of registered APIs) → encoded body


def _response(error_code: int) -> ApiVersionsResponse:
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in supported_versions()]
    return ApiVersionsResponse(error_code=error_code, api_keys=keys, throttle_time_ms=0)


def unsupported_version_response(correlation_id: int) -> list:
    return encode_response(_response(UnsupportedVersionError.errno), 0, correlation_id)


@handles(ApiKey.ApiVersions, ApiVersionsRequest, versions=(0, 4))
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest):
    key = (ctx.api_version, len(HANDLERS))
    body = _cache.get(key)
    if body is None:
        body = _cache[key] = bytes(_response(0).encode(version=ctx.api_version))
    # ApiVersions responses always use header v0 (KIP-511).
    return RawResponse(frame_parts([response_header(ctx.header.correlation_id, False), body]))
