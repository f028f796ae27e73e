"""IncrementalAlterConfigs (key 44), v0-1.

TOPIC resources: SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) — the last
two only for LIST configs (cleanup.policy), starting from the topic's current value in this
broker's metadata cache (or the default). The result is forwarded to the controller
(alter_topic_configs, replace=False), which validates with Kafka's wording (INVALID_CONFIG).
A config key given twice in one resource is INVALID_REQUEST ("Error due to duplicate config
keys"); a resource given twice is answered once with INVALID_REQUEST ("Duplicate resource.").
v1: flexible.
BROKER resources (a broker id, or "" for the cluster default): Kafka's dynamic broker configs
(KIP-226, minibroker.controller.broker_configs), APPEND / SUBTRACT starting from the resource's
dynamic value, else the broker's static one; BROKER_LOGGER resources answer INVALID_REQUEST.
GROUP resources (KIP-848 group configs, from Kafka 4.0): SET and DELETE
(minibroker.controller.group_configs); no group config is a LIST.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka.errors import InvalidConfigurationError, InvalidRequestError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handlers.k32_describe_configs import (LIST, TOPIC_CONFIG_TYPES,
                                                             broker_values)
from minibroker.broker.handlers.k33_alter_configs import (BROKER, GROUP, Outcome, alter_each,
                                                           forward_alter, group_configs_served)
from minibroker.controller import group_configs
from minibroker.controller import dynamic_broker_configs as dyn
from minibroker.log import config as log_config

_Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _items(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def changes_for(current: Mapping[str, str | None], configs: Sequence[Any], broker: bool = False
                ) -> tuple[dict[str, str | None] | None, int, str]:
    """The name -> new value (None: delete) map, or (None, error code, message). `current`:
    the values APPEND / SUBTRACT start from (a topic's configs, or a broker's)."""
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        return None, InvalidRequestError.errno, "Error due to duplicate config keys"
    changes: dict[str, str | None] = {}
    for c in configs:
        op, name = c.config_operation, c.name
        if op == SET:
            if c.value is None:
                return None, InvalidRequestError.errno, f"Null value not supported for : {name}"
            changes[name] = c.value
        elif op == DELETE:
            changes[name] = None
        elif op in (APPEND, SUBTRACT):
            if (name not in dyn.LIST_CONFIGS and (dyn.is_dynamic(name) or name in current)) \
                    if broker else \
                    (name in log_config.DEFAULTS and TOPIC_CONFIG_TYPES.get(name) != LIST):
                return (None, InvalidConfigurationError.errno,
                        f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.")
            now = _items(current.get(name, None if broker else log_config.DEFAULTS.get(name)))
            given = _items(c.value)
            if op == APPEND:
                now += [v for v in given if v not in now]
            else:
                now = [v for v in now if v not in given]
            changes[name] = ",".join(now)
        else:
            return None, InvalidRequestError.errno, f"Unknown alter config operation type {op}"
    return changes, 0, ""


@handles(ApiKey.IncrementalAlterConfigs, IncrementalAlterConfigsRequest, versions=(0, 1))
async def handle_incremental_alter_configs(ctx: RequestContext,
                                           req: IncrementalAlterConfigsRequest
        ) -> IncrementalAlterConfigsResponse:
    async def alter(r: Any) -> Outcome:
        broker = r.resource_type == BROKER
        if r.resource_type == GROUP:
            current: Mapping[str, str | None] = {
                **{k.name: k.default for k in group_configs.KEYS.values()},
                **await ctx.controller.describe_group_configs(r.resource_name)}
            changes, code, message = changes_for(current, r.configs, broker=True)
        else:
            current = _current_configs(ctx, r.resource_name, broker)
            changes, code, message = changes_for(current, r.configs, broker)
        if changes is None:
            return code, message
        return await forward_alter(ctx, r, changes, validate_only=req.validate_only,
                                   replace=False)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=await alter_each(
        req.resources, _Result, alter, dynamic_brokers=True, groups=group_configs_served(ctx)))


def _current_configs(ctx: RequestContext, name: str, broker: bool) -> Mapping[str, str | None]:
    """What APPEND / SUBTRACT start from: a broker's dynamic values over its static ones, or
    the topic's configs in this broker's metadata cache."""
    if broker:
        dynamic = ctx.node.dynamic_configs or {}
        return {**broker_values(ctx.services), **dynamic.get("", {}), **dynamic.get(name, {})}
    topic = ctx.metadata.topics.get(name)
    return topic.configs if topic else {}
