"""CreateTopics (key 19), v0-7.

v1: validate_only, error_message.  v2: throttle_time_ms.  v4: num_partitions / replication_factor
-1 take the broker defaults (num.partitions, default.replication.factor).  v5: flexible; the
response carries num_partitions, replication_factor and every topic config (DYNAMIC_TOPIC_CONFIG
when set; STATIC_BROKER_CONFIG when a broker log.* config sets its default; DEFAULT_CONFIG
otherwise).  v7: topic_id.
A name given twice in one request is not created and answered once with INVALID_REQUEST
("Duplicate topic name.", as Kafka's ControllerApis). A manual assignment needs num_partitions and
replication_factor -1. After the controller committed, we wait until this broker's metadata cache
shows a leader for every partition, as Kafka's DelayedCreatePartitions does, bounded by timeout_ms
(<= 0: no wait); a topic not visible by then is answered with REQUEST_TIMED_OUT.
KIP-599 (broker/controller_quota.py): the partitions created count against the client's
controller mutation quota; v6+ topics met while it is in debt answer THROTTLING_QUOTA_EXCEEDED.
Not implemented: create topic policies, topic-name collisions between '.' and '_'.
"""
from __future__ import annotations

import uuid
from typing import Any, TypeAlias

from kafka.errors import (InvalidPartitionsError, InvalidReplicationFactorError,
                          InvalidRequestError, RequestTimedOutError,
                          ThrottlingQuotaExceededError)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.metadata_wait import topic_has_leaders, wait_for_metadata
from minibroker.log import config as log_config

_Result: TypeAlias = CreateTopicsResponse.CreatableTopicResult
_Config = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
_ZERO_UUID = uuid.UUID(int=0)
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def _error(name: str, code: int, message: str | None) -> _Result:
    return _Result(name=name, topic_id=_ZERO_UUID, error_code=code, error_message=message,
                   topic_config_error_code=0, num_partitions=-1, replication_factor=-1,
                   configs=[])


def _configs(set_configs: dict[str, str], defaults: dict[str, str]) -> list[Any]:
    out = []
    for name in sorted(log_config.DEFAULTS):
        if name in set_configs:
            value, source = set_configs[name], DYNAMIC_TOPIC_CONFIG
        elif defaults[name] != log_config.DEFAULTS[name]:
            value, source = defaults[name], STATIC_BROKER_CONFIG
        else:
            value, source = log_config.DEFAULTS[name], DEFAULT_CONFIG
        out.append(_Config(name=name, value=value, read_only=False, config_source=source,
                           is_sensitive=False))
    return out


@handles(ApiKey.CreateTopics, CreateTopicsRequest, versions=(0, 7))
async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest
        ) -> CreateTopicsResponse:
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results: list[_Result | None] = []
    specs, pending = [], []         # pending: (index in results, name, configs)
    quota, client_id = ctx.quota, ctx.header.client_id or ""
    strict, refused_ms = ctx.api_version >= 6, 0
    limited = quota.limited(client_id) and not req.validate_only
    answered: set[str] = set()
    for t in req.topics:
        if counts[t.name] > 1:
            if t.name not in answered:      # one entry per name: the response is keyed by name
                answered.add(t.name)
                results.append(_error(t.name, InvalidRequestError.errno, "Duplicate topic name."))
            continue
        assignments = None
        if t.assignments:
            if t.num_partitions != -1:
                results.append(_error(t.name, InvalidPartitionsError.errno,
                                      "A manual partition assignment was specified, but "
                                      "numPartitions was not set to -1."))
                continue
            if t.replication_factor != -1:
                results.append(_error(t.name, InvalidReplicationFactorError.errno,
                                      "A manual partition assignment was specified, but "
                                      "replication factor was not set to -1."))
                continue
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        specs.append((t.name, t.num_partitions, t.replication_factor, assignments, configs))
        pending.append((len(results), t.name, configs))
        results.append(None)
    if specs and limited:
        # Kafka validates first: only topics that would be created count, in request order.
        checked = await ctx.controller.create_topics(specs, validate_only=True)
        kept = []
        for spec, (i, name, configs), res in zip(specs, pending, checked):
            throttle = 0 if res.error_code else quota.try_record(
                client_id, max(res.partitions, 0), ctx.clock.now_ms(), strict)
            if res.error_code or throttle:
                refused_ms = max(refused_ms, throttle)
                results[i] = _error(name, res.error_code, res.message) if res.error_code else \
                    _error(name, ThrottlingQuotaExceededError.errno,
                           "The throttling quota has been exceeded.")
            else:
                kept.append((spec, (i, name, configs)))
        specs, pending = [s for s, _ in kept], [p for _, p in kept]
    if specs:
        items = await ctx.controller.create_topics(specs, validate_only=req.validate_only)
        for (i, name, configs), res in zip(pending, items):
            if res.error_code:
                results[i] = _error(name, res.error_code, res.message)
            else:
                results[i] = _Result(name=name, topic_id=res.topic_id or _ZERO_UUID, error_code=0,
                                     error_message=None, topic_config_error_code=0,
                                     num_partitions=res.partitions,
                                     replication_factor=res.replication_factor,
                                     configs=_configs(configs, ctx.services.log_defaults.to_configs()))
        created = [(i, r.name, r.num_partitions) for i, _, _ in pending
                   if (r := results[i]) is not None and r.error_code == 0]
        if created and not req.validate_only and req.timeout_ms > 0:
            await wait_for_metadata(
                ctx, lambda: all(topic_has_leaders(ctx, n, c) for _, n, c in created),
                req.timeout_ms)
            for i, name, count in created:
                if not topic_has_leaders(ctx, name, count):
                    results[i] = _error(name, RequestTimedOutError.errno, None)
    throttle_ms = quota.response_throttle_ms(client_id, ctx.clock.now_ms(), strict, refused_ms) \
        if limited else 0
    return CreateTopicsResponse(throttle_time_ms=throttle_ms, topics=results)
