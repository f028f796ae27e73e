"""ApiVersions (key 18), v0-4.

v1: throttle_time_ms.  v3: flexible, client software name/version (KIP-511); an unsupported
version is answered at v0 with UNSUPPORTED_VERSION and our ranges so the client can retry.
A client listener lists no inter-broker API (dispatch.INTER_BROKER_KEYS), as Kafka 4.
v3+: supported and finalized features (KIP-584, broker/features.py), finalized_features_epoch
being the metadata log offset of the broker's metadata (UpdateMetadata's MetadataOffset).
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest

from kafka.protocol.metadata import ApiVersionsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import RawResponse, api_versions_response, handles
from minibroker.broker.features import features_for
from minibroker.protocol.framing import frame_parts, response_header

# (version, the broker's table and its size, control plane, features epoch) → encoded body
_cache: dict[tuple[int, int, int, bool, int], bytes] = {}
_CACHE_MAX = 256            # entries (the epoch moves with each metadata change)
_Supported = ApiVersionsResponse.SupportedFeatureKey
_Finalized = ApiVersionsResponse.FinalizedFeatureKey


@handles(ApiKey.ApiVersions, ApiVersionsRequest, versions=(0, 4))
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> RawResponse:
    handlers = ctx.services.handlers    # HANDLERS, or an emulated release's (broker/releases.py)
    supported, finalized = features_for(ctx.services.config.kafka_version, ctx.api_version)
    epoch = ctx.metadata.metadata_offset if supported or finalized else -1
    key = (ctx.api_version, id(handlers), len(handlers), ctx.control_plane, epoch)
    body = _cache.get(key)
    if body is None:
        resp = api_versions_response(0, ctx.control_plane, handlers)
        if ctx.api_version >= 3:
            resp.supported_features = [_Supported(name=f.name, min_version=f.min_version,
                                                  max_version=f.max_version) for f in supported]
            resp.finalized_features_epoch = epoch
            resp.finalized_features = [_Finalized(name=f.name, max_version_level=f.finalized,
                                                  min_version_level=f.finalized)
                                       for f in finalized]
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        body = _cache[key] = bytes(resp.encode(version=ctx.api_version))
    # ApiVersions responses always use header v0 (KIP-511).
    return RawResponse(frame_parts([response_header(ctx.header.correlation_id, False), body]))
