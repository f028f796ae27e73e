"""AlterConfigs (key 33), v0-2 — legacy: the given configs replace the topic's whole set.

TOPIC resources are forwarded to the controller (alter_topic_configs, replace=True); unknown names
and invalid values are INVALID_CONFIG with Kafka's wording ("Unknown topic config name: x",
"Invalid value abc for configuration retention.ms: Not a number of type LONG"). A null value
removes the config. validate_only checks without changing anything. A resource given twice is
answered once with INVALID_REQUEST ("Duplicate resource.").
BROKER resources (a broker id, or "" for the cluster default): the given dynamic broker configs
replace that resource's set (KIP-226; minibroker.controller.broker_configs).
v1: throttle_time_ms.  v2: flexible.
GROUP resources (KIP-848 group configs, from Kafka 4.0; minibroker.controller.group_configs):
the group's configs are replaced by the given ones.
Not implemented: BROKER_LOGGER resources answer INVALID_REQUEST.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kafka.errors import InvalidRequestError, InvalidTopicError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.protocol.topic_names import invalid_reason

_Result = AlterConfigsResponse.AlterConfigsResourceResponse
# (error code, message) of one resource
Outcome = tuple[int, str | None]
TOPIC, GROUP, BROKER, BROKER_LOGGER = 2, 32, 4, 8


def precheck(resources: Sequence[Any], dynamic_brokers: bool = False, groups: bool = False
             ) -> dict[int, Outcome | None]:
    """Errors found before asking the controller, by resource index: resource types other than
    TOPIC (and BROKER, when `dynamic_brokers`; GROUP, when `groups`), illegal topic names,
    duplicate resources (all but the first occurrence left out: None)."""
    counts: dict[tuple[int, str], int] = {}
    for r in resources:
        counts[(r.resource_type, r.resource_name)] = counts.get(
            (r.resource_type, r.resource_name), 0) + 1
    errors: dict[int, Outcome | None] = {}
    answered: set[tuple[int, str]] = set()
    for i, r in enumerate(resources):
        key = (r.resource_type, r.resource_name)
        if counts[key] > 1:
            errors[i] = None if key in answered else (InvalidRequestError.errno,
                                                      "Duplicate resource.")
            answered.add(key)
        elif r.resource_type == BROKER and dynamic_brokers or r.resource_type == GROUP and groups:
            continue
        elif r.resource_type == BROKER_LOGGER:
            errors[i] = (InvalidRequestError.errno, "Broker loggers are not configurable here: "
                         "minibroker's brokers log through Python's logging.")
        elif r.resource_type == BROKER:
            errors[i] = (InvalidRequestError.errno, "Dynamic broker configs are not supported.")
        elif r.resource_type != TOPIC:
            errors[i] = (InvalidRequestError.errno, f"Unknown resource type {r.resource_type}.")
        elif invalid_reason(r.resource_name):
            errors[i] = (InvalidTopicError.errno, invalid_reason(r.resource_name))
    return errors


async def alter_each(resources: Sequence[Any], result_class: Any,
                     alter: Callable[[Any], Awaitable[Outcome]], dynamic_brokers: bool = False,
                     groups: bool = False) -> list[Any]:
    """One result per resource, in request order: the precheck's error, else `await alter(r)`'s
    (error code, message); a duplicate resource is answered once."""
    errors = precheck(resources, dynamic_brokers, groups)
    results = []
    for i, r in enumerate(resources):
        if i not in errors:
            code, message = await alter(r)
        elif (error := errors[i]) is not None:
            code, message = error
        else:
            continue
        results.append(result_class(error_code=code, error_message=message,
                                    resource_type=r.resource_type, resource_name=r.resource_name))
    return results


async def forward_alter(ctx: RequestContext, r: Any, changes: dict[str, str | None],
                        validate_only: bool, replace: bool) -> Outcome:
    """The controller's (error code, message) for one resource's changes (None: back to the
    default); `replace`: the changes are the resource's whole dynamic config (AlterConfigs)."""
    if r.resource_type == BROKER:
        res = await ctx.controller.alter_broker_configs(
            r.resource_name, changes, validate_only=validate_only, replace=replace)
    elif r.resource_type == GROUP:
        res = await ctx.controller.alter_group_configs(
            r.resource_name, changes, validate_only=validate_only, replace=replace)
    else:
        res = await ctx.controller.alter_topic_configs(
            r.resource_name, changes, replace=replace, validate_only=validate_only)
    return res.error_code, res.message


@handles(ApiKey.AlterConfigs, AlterConfigsRequest, versions=(0, 2))
async def handle_alter_configs(ctx: RequestContext, req: AlterConfigsRequest
        ) -> AlterConfigsResponse:
    async def alter(r: Any) -> Outcome:
        return await forward_alter(ctx, r, {c.name: c.value for c in r.configs},
                                   validate_only=req.validate_only, replace=True)
    return AlterConfigsResponse(throttle_time_ms=0, responses=await alter_each(
        req.resources, _Result, alter, dynamic_brokers=True, groups=group_configs_served(ctx)))


def group_configs_served(ctx: RequestContext) -> bool:
    """GROUP resources are Kafka 4.0's (KIP-848); an emulated older release refuses them as
    an unknown resource type."""
    version = ctx.services.config.kafka_version
    return version is None or tuple(int(p) for p in version.split(".")[:2]) >= (4, 0)
