"""DeleteTopics (key 20), v0-6.

v1: throttle_time_ms.  v4: flexible.  v5: error_message.  v6: topics by name or by topic id
(exactly one of them; a topic id is resolved through this broker's metadata cache).
Duplicates in one request are answered once with INVALID_REQUEST ("Duplicate topic name." /
"Duplicate topic id.", as Kafka's ControllerApis). After the controller committed, we wait until
the topic is gone from this broker's metadata cache, bounded by timeout_ms (<= 0: no wait); a topic
still visible by then is answered with REQUEST_TIMED_OUT.
KIP-599 (broker/controller_quota.py): the partitions deleted count against the client's
controller mutation quota; v5+ topics met while it is in debt answer THROTTLING_QUOTA_EXCEEDED.
Not implemented: delete.topic.enable=false (TOPIC_DELETION_DISABLED).
"""
from __future__ import annotations

import uuid
from typing import Any, TypeAlias

from kafka.errors import (InvalidRequestError, RequestTimedOutError,
                          ThrottlingQuotaExceededError, UnknownTopicIdError)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.metadata_wait import wait_for_metadata

_Result: TypeAlias = DeleteTopicsResponse.DeletableTopicResult
_ZERO_UUID = uuid.UUID(int=0)


def _result(name: str | None, topic_id: uuid.UUID | None, code: int = 0,
            message: str | None = None) -> _Result:
    return _Result(name=name, topic_id=topic_id or _ZERO_UUID, error_code=code,
                   error_message=message)


@handles(ApiKey.DeleteTopics, DeleteTopicsRequest, versions=(0, 6))
async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest
        ) -> DeleteTopicsResponse:
    cache = ctx.metadata
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id if t.topic_id not in (None, _ZERO_UUID) else None)
                  for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    # Only well-formed entries (exactly one of name and id) count towards duplicates.
    keys = [None if (n is None) == (i is None) else ("id", i) if i is not None else ("name", n)
            for n, i in wanted]
    seen: dict[tuple[str, Any] | None, int] = {}
    for k in keys:
        seen[k] = seen.get(k, 0) + 1
    results: list[_Result | None] = []
    answered: set[tuple[str, Any] | None] = set()
    to_delete: list[tuple[int, str, uuid.UUID | None]] = []    # (result index, name, id)
    quota, client_id = ctx.quota, ctx.header.client_id or ""
    strict, refused_ms, limited = ctx.api_version >= 5, 0, quota.limited(client_id)
    recorded: dict[str, int] = {}
    for (name, topic_id), key in zip(wanted, keys):
        if name is None and topic_id is None:
            results.append(_result(None, None, InvalidRequestError.errno,
                                   "Neither topic name nor id were specified."))
            continue
        if name is not None and topic_id is not None:
            results.append(_result(name, topic_id, InvalidRequestError.errno,
                                   "You may not specify both topic name and topic id."))
            continue
        if seen[key] > 1:
            assert key is not None      # a malformed entry was answered above
            if key not in answered:
                answered.add(key)
                results.append(_result(name, topic_id, InvalidRequestError.errno,
                                       f"Duplicate topic {key[0]}."))
            continue
        if topic_id is not None:
            info = cache.topics_by_id.get(topic_id)
            if info is None:
                results.append(_result(None, topic_id, UnknownTopicIdError.errno,
                                       "This server does not host this topic ID."))
                continue
            name = info.name
        if limited and name in cache.topics:
            n = len(cache.topics[name].partitions)
            throttle = quota.try_record(client_id, n, ctx.clock.now_ms(), strict)
            if throttle:
                refused_ms = max(refused_ms, throttle)
                results.append(_result(name, topic_id, ThrottlingQuotaExceededError.errno,
                                       "The throttling quota has been exceeded."))
                continue
            recorded[name] = n
        to_delete.append((len(results), name, topic_id))
        results.append(None)
    if to_delete:
        items = await ctx.controller.delete_topics([name for _, name, _ in to_delete])
        deleted: list[tuple[int, str, uuid.UUID | None]] = []
        for (i, name, topic_id), res in zip(to_delete, items):
            topic_id = topic_id or res.topic_id
            results[i] = _result(name, topic_id, res.error_code, res.message)
            if res.error_code:
                quota.refund(client_id, recorded.get(name, 0))
            if res.error_code == 0:
                deleted.append((i, name, topic_id))

        def gone(name: str, topic_id: uuid.UUID | None) -> bool:
            t = cache.topics.get(name)
            return t is None or t.topic_id != topic_id

        if deleted and req.timeout_ms > 0:
            await wait_for_metadata(ctx, lambda: all(gone(n, t) for _, n, t in deleted),
                                    req.timeout_ms)
            for i, name, topic_id in deleted:
                if not gone(name, topic_id):
                    results[i] = _result(name, topic_id, RequestTimedOutError.errno)
    throttle_ms = quota.response_throttle_ms(client_id, ctx.clock.now_ms(), strict, refused_ms) \
        if limited else 0
    return DeleteTopicsResponse(throttle_time_ms=throttle_ms, responses=results)
