"""Where each API is authorized (KIP-11), as Kafka's KafkaApis checks it, in one table.

Dispatch consults it only when the broker has an authorizer (`Broker.authorizer`; off by
default, so the hot path pays one attribute test). Two kinds of rule:

- REQUEST rules deny a whole request: the answer is Kafka's error response (every error field
  set, as AbstractRequest.getErrorResponse), the handler never runs, nothing changes.
- ITEM rules check each topic / group / transactional id / config resource a request names:
  the denied items are taken out of the request before the handler sees it and answered with
  their error, merged into the handler's response (as Kafka's "unauthorized" maps).

What a handler must decide itself (Produce, a consumer's Fetch, Metadata's hiding and
auto-creation, ListGroups and ListTransactions filtering, authorized_operations) calls
`ctx.authorize` in the handler.
SaslHandshake (17) and SaslAuthenticate (36) come before any principal (network/sasl.py): no
ACL applies to them, as in Kafka. Our private APIs: ConsumerGroupPosition (1000) READ on its group; PartitionLeaderEpochsForPartitions
(1001) DESCRIBE on each topic; AssignPartitions (1002) ALTER and PartitionAssignmentStatus (1003)
DESCRIBE on the cluster, as AlterPartitionReassignments / ListPartitionReassignments; FaultControl
(1004) ALTER on the cluster.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.errors import (ClusterAuthorizationFailedError, GroupAuthorizationFailedError,
                          OperationNotAttemptedError, TopicAuthorizationFailedError,
                          TransactionalIdAuthorizationFailedError)

from minibroker.broker.error_response import error_response
from minibroker.security.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as RT

if TYPE_CHECKING:
    from minibroker.broker.context import RequestContext

TOPIC_DENIED: int = TopicAuthorizationFailedError.errno
GROUP_DENIED: int = GroupAuthorizationFailedError.errno
CLUSTER_DENIED: int = ClusterAuthorizationFailedError.errno
TXN_DENIED: int = TransactionalIdAuthorizationFailedError.errno
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_GROUP = 2, 4, 8, 32

# (ctx, req) -> 0 or the error code of the whole request
RequestRule = Callable[["RequestContext", Any], int]
# (ctx, req, item) -> 0 or the item's error code
ItemCheck = Callable[["RequestContext", Any, Any], int]
# (ctx, req) -> the request attribute holding the items; the check of each
ItemRule = tuple[Callable[["RequestContext", Any], str | None], ItemCheck]


def _cluster(op: Op, code: int = CLUSTER_DENIED) -> RequestRule:
    return lambda ctx, req: 0 if ctx.authorize(op, RT.CLUSTER, CLUSTER_NAME) else code


def _group(op: Op) -> RequestRule:
    return lambda ctx, req: 0 if ctx.authorize(op, RT.GROUP, req.group_id) else GROUP_DENIED


def _txn_then_group(ctx: RequestContext, req: Any) -> int:
    if not ctx.authorize(Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
        return TXN_DENIED
    return 0 if ctx.authorize(Op.READ, RT.GROUP, req.group_id) else GROUP_DENIED


def _end_txn(ctx: RequestContext, req: Any) -> int:
    return 0 if ctx.authorize(Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id) else TXN_DENIED


def _init_producer_id(ctx: RequestContext, req: Any) -> int:
    if req.transactional_id is not None:
        return 0 if ctx.authorize(Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id) \
            else TXN_DENIED
    if ctx.authorize(Op.IDEMPOTENT_WRITE, RT.CLUSTER, CLUSTER_NAME):
        return 0
    # KIP-679: WRITE on any topic is enough for an idempotent producer.
    a = ctx.authorizer      # not None: ctx.authorize allows everything without one
    return 0 if a is None or a.authorize_by_resource_type(ctx.principal, ctx.client_host,
                                                          Op.WRITE, RT.TOPIC) else CLUSTER_DENIED


def _find_coordinator(ctx: RequestContext, req: Any) -> int:
    if ctx.api_version >= 4:
        return 0                                        # per key: ITEM rule
    return _coordinator_key(ctx, req, req.key)


def _coordinator_key(ctx: RequestContext, req: Any, key: str) -> int:
    if req.key_type == 1:
        return 0 if ctx.authorize(Op.DESCRIBE, RT.TRANSACTIONAL_ID, key) else TXN_DENIED
    return 0 if ctx.authorize(Op.DESCRIBE, RT.GROUP, key) else GROUP_DENIED


def _offset_fetch(ctx: RequestContext, req: Any) -> int:
    if ctx.api_version >= 8:
        return 0                                        # per group: ITEM rule
    return 0 if ctx.authorize(Op.DESCRIBE, RT.GROUP, req.group_id) else GROUP_DENIED


def replica_id(ctx: RequestContext, req: Any) -> int:
    """The fetching replica (Fetch v15+: in ReplicaState); -1 for a consumer."""
    if ctx.header.api_key == 1 and ctx.api_version >= 15:
        state = req.replica_state
        return -1 if state is None else state.replica_id
    r = getattr(req, "replica_id", -1)
    return -1 if r is None else r


def _from_replica(code: int) -> RequestRule:
    """Fetch from a follower (replica id >= 0): CLUSTER_ACTION."""
    def check(ctx: RequestContext, req: Any) -> int:
        if replica_id(ctx, req) >= 0 and \
                not ctx.authorize(Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME):
            return code
        return 0
    return check


def _heartbeat_848(ctx: RequestContext, req: Any) -> int:
    if not ctx.authorize(Op.READ, RT.GROUP, req.group_id):
        return GROUP_DENIED
    for t in sorted(req.subscribed_topic_names or ()):
        if not ctx.authorize(Op.DESCRIBE, RT.TOPIC, t):
            return TOPIC_DENIED
    return 0


def _add_partitions_txn(ctx: RequestContext, req: Any) -> int:
    if ctx.api_version >= 4:
        return 0 if ctx.authorize(Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME) else CLUSTER_DENIED
    return 0 if ctx.authorize(Op.WRITE, RT.TRANSACTIONAL_ID, req.v3_and_below_transactional_id) \
        else TXN_DENIED


REQUEST_RULES: dict[int, RequestRule] = {
    1: _from_replica(TOPIC_DENIED),
    4: _cluster(Op.CLUSTER_ACTION), 5: _cluster(Op.CLUSTER_ACTION), 6: _cluster(Op.CLUSTER_ACTION),
    8: _group(Op.READ), 9: _offset_fetch, 10: _find_coordinator,
    11: _group(Op.READ), 12: _group(Op.READ), 13: _group(Op.READ), 14: _group(Op.READ),
    22: _init_producer_id, 24: _add_partitions_txn,
    25: _txn_then_group, 26: _end_txn, 27: _cluster(Op.CLUSTER_ACTION), 28: _txn_then_group,
    35: _cluster(Op.DESCRIBE), 43: _cluster(Op.ALTER), 45: _cluster(Op.ALTER),
    46: _cluster(Op.DESCRIBE), 47: _group(Op.DELETE), 68: _heartbeat_848,
    50: _cluster(Op.DESCRIBE),       # SCRAM credentials (KIP-554); 51 answers per user (k51)
    55: _cluster(Op.DESCRIBE),       # DescribeQuorum, as KafkaApis (KIP-595)
    1000: _group(Op.READ), 1002: _cluster(Op.ALTER), 1003: _cluster(Op.DESCRIBE),
    1004: _cluster(Op.ALTER),
}


# ---------------------------------------------------------------------- item rules
def _topic_name(ctx: RequestContext, item: Any) -> str | None:
    name = getattr(item, "name", None) or getattr(item, "topic", None)
    if isinstance(item, str):
        name = item
    if not name:
        topic_id = getattr(item, "topic_id", None)
        info = ctx.metadata.topics_by_id.get(topic_id) if topic_id else None
        name = info.name if info is not None else None
    return name


def _topics(op: Op) -> ItemCheck:
    def check(ctx: RequestContext, req: Any, item: Any) -> int:
        name = _topic_name(ctx, item)
        if name is None:
            return 0                        # unknown topic id: the handler's UNKNOWN_TOPIC_ID
        return 0 if ctx.authorize(op, RT.TOPIC, name) else TOPIC_DENIED
    return check


def _create_topic(ctx: RequestContext, req: Any, item: Any) -> int:
    if ctx.authorize(Op.CREATE, RT.CLUSTER, CLUSTER_NAME):
        return 0
    return 0 if ctx.authorize(Op.CREATE, RT.TOPIC, item.name) else TOPIC_DENIED


def _configs(op: Op) -> ItemCheck:
    def check(ctx: RequestContext, req: Any, item: Any) -> int:
        if item.resource_type == CONFIG_TOPIC:
            return 0 if ctx.authorize(op, RT.TOPIC, item.resource_name) else TOPIC_DENIED
        if item.resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER):
            return 0 if ctx.authorize(op, RT.CLUSTER, CLUSTER_NAME) else CLUSTER_DENIED
        if item.resource_type == CONFIG_GROUP:      # KIP-848 group configs, as Kafka 4's KafkaApis
            return 0 if ctx.authorize(op, RT.GROUP, item.resource_name) else GROUP_DENIED
        return 0
    return check


def _groups(op: Op) -> ItemCheck:
    def check(ctx: RequestContext, req: Any, item: Any) -> int:
        group = item if isinstance(item, str) else item.group_id
        return 0 if ctx.authorize(op, RT.GROUP, group) else GROUP_DENIED
    return check


def _txn_ids(ctx: RequestContext, req: Any, item: Any) -> int:
    return 0 if ctx.authorize(Op.DESCRIBE, RT.TRANSACTIONAL_ID, item) else TXN_DENIED


def _coordinator_keys(ctx: RequestContext, req: Any, item: Any) -> int:
    return _coordinator_key(ctx, req, item)


def _attr(name: str, from_version: int = 0, before: str | None = None
          ) -> Callable[[RequestContext, Any], str | None]:
    return lambda ctx, req: name if ctx.api_version >= from_version else before


ITEM_RULES: dict[int, ItemRule] = {
    2: (_attr("topics"), _topics(Op.DESCRIBE)),
    8: (_attr("topics"), _topics(Op.READ)),
    9: (_attr("groups", 8, "topics"),
        lambda ctx, req, item: _groups(Op.DESCRIBE)(ctx, req, item) if ctx.api_version >= 8
        else _topics(Op.DESCRIBE)(ctx, req, item)),
    10: (_attr("coordinator_keys", 4), _coordinator_keys),
    15: (_attr("groups"), _groups(Op.DESCRIBE)),
    19: (_attr("topics"), _create_topic),
    20: (_attr("topics", 6, "topic_names"), _topics(Op.DELETE)),
    21: (_attr("topics"), _topics(Op.DELETE)),
    # KIP-320: consumers use it too; CLUSTER_ACTION (a follower) or DESCRIBE on each topic.
    23: (lambda ctx, req: None if ctx.authorize(Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)
         else "topics", _topics(Op.DESCRIBE)),
    28: (_attr("topics"), _topics(Op.READ)),
    32: (_attr("resources"), _configs(Op.DESCRIBE_CONFIGS)),
    33: (_attr("resources"), _configs(Op.ALTER_CONFIGS)),
    37: (_attr("topics"), _topics(Op.ALTER)),
    42: (_attr("groups_names"), _groups(Op.DELETE)),
    44: (_attr("resources"), _configs(Op.ALTER_CONFIGS)),
    47: (_attr("topics"), _topics(Op.READ)),
    61: (_attr("topics"), _topics(Op.READ)),
    65: (_attr("transactional_ids"), _txn_ids),
    69: (_attr("group_ids"), _groups(Op.DESCRIBE)),
    1001: (_attr("topics"), _topics(Op.DESCRIBE)),
}


def check_request(ctx: RequestContext, api_key: int, req: Any
                  ) -> tuple[Any, Callable[[Any], Any] | None]:
    """(a denial response or None, a function completing the handler's response or None).
    May take denied items out of `req`."""
    denied, complete = _check_request(ctx, api_key, req)
    if denied is None and api_key == 19 and ctx.api_version >= 5:
        after = complete
        complete = lambda resp: _created_configs(ctx, after(resp) if after else resp)
    if denied is None and api_key == 9:
        wanted = _offset_fetch_wanted(ctx, req)
        after = complete
        complete = lambda resp: _visible_offsets(ctx, wanted, after(resp) if after else resp)
    return denied, complete


def _created_configs(ctx: RequestContext, resp: Any) -> Any:
    """CreateTopics v5+: a created topic's configs are shown only with DESCRIBE_CONFIGS on it
    (else TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED and none), as Kafka's handler."""
    for t in resp.topics or ():
        if not t.error_code and not ctx.authorize(Op.DESCRIBE_CONFIGS, RT.TOPIC, t.name):
            t.topic_config_error_code, t.configs = TOPIC_DENIED, None
    return resp


def _offset_fetch_wanted(ctx: RequestContext, req: Any) -> dict[Any, bool]:
    """OffsetFetch: group -> whether it asked for all its topics (None) or named them."""
    if ctx.api_version < 8:
        return {req.group_id: req.topics is None}
    return {g.group_id: g.topics is None for g in req.groups or ()}


def _visible_offsets(ctx: RequestContext, wanted: dict[Any, bool], resp: Any) -> Any:
    """Kafka's OffsetFetch: topics the principal may not DESCRIBE are left out of an all-topics
    answer; named ones answer TOPIC_AUTHORIZATION_FAILED (the v8+ per-group topics here, v0-7's
    by the item rule)."""
    groups = resp.groups if ctx.api_version >= 8 else [resp]
    for g in groups or ():
        if g.error_code:
            continue
        all_topics = wanted.get(getattr(g, "group_id", None), ctx.api_version < 8 and
                                next(iter(wanted.values()), False))
        kept = []
        for t in g.topics or ():
            if ctx.authorize(Op.DESCRIBE, RT.TOPIC, t.name):
                kept.append(t)
            elif not all_topics:
                for p in t.partitions:
                    p.committed_offset, p.error_code = -1, TOPIC_DENIED
                kept.append(t)
        g.topics = kept
    return resp


def _check_request(ctx: RequestContext, api_key: int, req: Any
                   ) -> tuple[Any, Callable[[Any], Any] | None]:
    rule = REQUEST_RULES.get(api_key)
    if rule is not None:
        code = rule(ctx, req)
        if code:
            resp = _every_error(error_response(req, ctx.api_version, code), code)
            if api_key == 35:
                resp.results = []               # DescribeLogDirs: no directory, the error
            return resp, None
    if api_key == 24 and ctx.api_version < 4:
        return deny_topics_in_txn(ctx, req), None
    item_rule = ITEM_RULES.get(api_key)
    if item_rule is None:
        return None, None
    attr = item_rule[0](ctx, req)
    if not attr:
        return None, None
    items = getattr(req, attr, None)
    if not items:
        return None, None
    codes = [item_rule[1](ctx, req, item) for item in items]
    if not any(codes):
        return None, None
    version = ctx.api_version
    answers = []
    for code in sorted(set(codes) - {0}):
        denied = [i for i, c in zip(items, codes) if c == code]
        setattr(req, attr, denied)
        answers.append(_named(error_response(req, version, code), denied))
    setattr(req, attr, [i for i, c in zip(items, codes) if not c])
    return None, lambda resp: _merge(resp, answers)


def _every_error(resp: Any, code: int) -> Any:
    """`code` in every *error_code field (error_response fills those named error_code only)."""
    if isinstance(resp, list):
        for x in resp:
            _every_error(x, code)
    elif hasattr(resp, "_struct"):
        for f in resp._struct._fields:
            v = getattr(resp, f.name, None)
            if f.name.endswith("error_code") and isinstance(v, int):
                setattr(resp, f.name, code)
            elif isinstance(v, list) or hasattr(v, "_struct"):
                _every_error(v, code)
    return resp


def _named(resp: Any, denied: list[Any]) -> Any:
    """Config resources answer with their type and name (error_response keys topics and groups
    only)."""
    if denied and hasattr(denied[0], "resource_name"):
        for f in resp._struct._fields:
            if f.is_struct_array():
                for item, asked in zip(getattr(resp, f.name) or (), denied):
                    item.resource_type, item.resource_name = asked.resource_type, \
                        asked.resource_name
    return resp


def _merge(resp: Any, answers: list[Any]) -> Any:
    """Append the denied items' answers to the handler's response arrays."""
    if resp is None or not hasattr(resp, "_struct"):
        return resp
    for f in resp._struct._fields:
        if not f.is_struct_array():
            continue
        for a in answers:
            extra = getattr(a, f.name, None)
            if extra:
                mine = getattr(resp, f.name, None)
                setattr(resp, f.name, list(mine or []) + list(extra))
    return resp


def deny_topics_in_txn(ctx: RequestContext, req: Any) -> Any | None:
    """AddPartitionsToTxn v0-3 naming a topic without WRITE: nothing is added; those partitions
    answer TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED (Kafka's handler)."""
    topics = req.v3_and_below_topics or []
    denied = {t.name for t in topics if not ctx.authorize(Op.WRITE, RT.TOPIC, t.name)}
    if not denied:
        return None
    resp = _every_error(error_response(req, ctx.api_version, OperationNotAttemptedError.errno),
                        OperationNotAttemptedError.errno)
    for t in resp.results_by_topic_v3_and_below or ():
        if t.name in denied:
            for p in t.results_by_partition:
                p.partition_error_code = TOPIC_DENIED
    return resp
