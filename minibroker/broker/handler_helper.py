"""What many handlers do alike (Kafka's RequestHandlerHelper and the answer shapes its APIs share).

Most Kafka answers are keyed as their requests are: each topic asked about, with one result per
partition. `per_partition` builds that shape from one function answering a partition, and
`by_topic` builds it from flat (topic, result) rows a service returned, so each handler says only
what differs: the call it makes and the result it fills in. `acl_api` and
`consumer_group_protocol` decorate handlers with the refusal a family of APIs shares.
"""
from __future__ import annotations

import functools
from typing import Any, Awaitable, Callable, Iterable, TypeVar, cast

from kafka.errors import (ClusterAuthorizationFailedError, SecurityDisabledError,
                          UnsupportedVersionError)

from minibroker.broker.context import RequestContext
from minibroker.broker.error_response import error_response
from minibroker.security.acl import CLUSTER_NAME, AclOperation, ResourceType


def per_partition(topics: Iterable[Any], topic_class: Callable[..., Any],
                  answer: Callable[[Any, Any], Any], *, name: str = "name",
                  partitions: str = "partitions", asked: str | None = None) -> list[Any]:
    """One `topic_class` per requested topic, in request order, keyed by its `name` field and
    holding `answer(topic, partition)` for each entry of its `asked` array (default: the
    response's `partitions` field name, as most requests spell both)."""
    asked = asked or partitions
    return [topic_class(**{name: getattr(t, name),
                           partitions: [answer(t, p) for p in getattr(t, asked)]})
            for t in topics]


def by_topic(rows: Iterable[tuple[Any, Any]], topic_class: Callable[..., Any], *,
             name: str = "name", partitions: str = "partitions") -> list[Any]:
    """(topic, result) rows grouped into one `topic_class` per topic: topics in the order they
    first appear, each topic's results in row order."""
    grouped: dict[Any, list[Any]] = {}
    for topic, result in rows:
        grouped.setdefault(topic, []).append(result)
    return [topic_class(**{name: t, partitions: results}) for t, results in grouped.items()]


def on_leadership_change(ctx: RequestContext) -> None:
    """After LeaderAndIsr / StopReplica: the coordinators load or unload the partitions of
    __consumer_offsets / __transaction_state this broker now leads or no longer does."""
    ctx.groups.on_leadership_change()
    ctx.txn.on_leadership_change()


def partition_codes(topics: Iterable[Any], topic_class: Callable[..., Any],
                    part_class: Callable[..., Any], codes: dict[tuple[str, int], int]
                    ) -> list[Any]:
    """per_partition answering each partition its error code in `codes`, keyed (topic name,
    partition index): the answer of the offset APIs (OffsetCommit, TxnOffsetCommit,
    OffsetDelete)."""
    return per_partition(topics, topic_class, lambda t, p: part_class(
        partition_index=p.partition_index, error_code=codes[(t.name, p.partition_index)]))


H = TypeVar("H", bound=Callable[[RequestContext, Any], Awaitable[Any]])


def acl_api(operation: AclOperation, no_authorizer: str) -> Callable[[H], H]:
    """An ACL API's handler (Kafka's AclApis), refusing the whole request, each item with the
    error: without `operation` on the cluster, CLUSTER_AUTHORIZATION_FAILED; without an
    authorizer, SECURITY_DISABLED with `no_authorizer` (each API words it its own way)."""
    def guard(handler: H) -> H:
        @functools.wraps(handler)
        async def guarded(ctx: RequestContext, req: Any) -> Any:
            if not ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME):
                return error_response(req, ctx.api_version, ClusterAuthorizationFailedError.errno)
            if ctx.authorizer is None:
                return error_response(req, ctx.api_version, SecurityDisabledError.errno,
                                      no_authorizer)
            return await handler(ctx, req)
        return cast(H, guarded)
    return guard


def consumer_group_protocol(handler: H) -> H:
    """A KIP-848 handler, answering UNSUPPORTED_VERSION in an emulated 3.x release: its brokers
    advertised the API but refused it unless group.coordinator.rebalance.protocols named
    "consumer" (default "classic", KafkaApis)."""
    @functools.wraps(handler)
    async def guarded(ctx: RequestContext, req: Any) -> Any:
        if not ctx.services.consumer_group_protocol:
            return error_response(req, ctx.api_version, UnsupportedVersionError.errno)
        return await handler(ctx, req)
    return cast(H, guarded)
