"""DescribeConfigs (key 32), v0-4.

TOPIC resources (type 2): every topic config (minibroker.log.config.DEFAULTS), its value set on the
topic (DYNAMIC_TOPIC_CONFIG) or the default: the broker's log.* synonym when set
(STATIC_BROKER_CONFIG), else Kafka's (DEFAULT_CONFIG); values from this broker's metadata cache
(the controller sends topic configs with UpdateMetadata). BROKER resources (type 4, name = this
broker's id, or "" for cluster defaults): the broker's ClusterConfig.describe(), read-only, source
STATIC_BROKER_CONFIG where it differs from the default. configuration_keys filters (unknown names
are left out, as in Kafka).
v0: is_default.  v1: config_source, synonyms (with include_synonyms: the topic-level value if set,
then the broker-level synonym, e.g. log.retention.ms).  v3: config_type, documentation (always
null).  v4: flexible.
Not implemented: BROKER_LOGGER resources, documentation text.
"""
from __future__ import annotations

from kafka.errors import InvalidRequestError, InvalidTopicError, UnknownTopicOrPartitionError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from minibroker.broker.dispatch import RequestContext, handles
from minibroker.broker.throttle import RATE_CONFIGS
from minibroker.broker.topic_names import invalid_reason
from minibroker.config import ClusterConfig
from minibroker.log import config as log_config

_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
# Kafka's ConfigDef types (DescribeConfigsResponse.ConfigType).
UNKNOWN, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 0, 1, 2, 3, 4, 5, 6, 7
TOPIC_CONFIG_TYPES = {
    "cleanup.policy": LIST, "max.message.bytes": INT, "message.timestamp.type": STRING,
    "min.insync.replicas": INT, "retention.bytes": LONG, "retention.ms": LONG,
    "segment.bytes": INT, "enable.ordered.delivery": BOOLEAN,
    "leader.replication.throttled.replicas": LIST, "follower.replication.throttled.replicas": LIST,
}
def _entry(name, value, source, read_only, config_type, synonyms) -> _Entry:
    return _Entry(name=name, value=value, read_only=read_only, config_source=source,
                  is_default=source == DEFAULT_CONFIG, is_sensitive=False, synonyms=synonyms,
                  config_type=config_type, documentation=None)


def topic_configs(set_configs: dict[str, str], keys, include_synonyms: bool,
                  defaults: dict[str, str]) -> list[_Entry]:
    """`defaults`: the broker's topic defaults (its log.* configs over Kafka's)."""
    out = []
    for name in sorted(log_config.DEFAULTS):
        if keys is not None and name not in keys:
            continue
        default = defaults[name]
        default_source = DEFAULT_CONFIG if default == log_config.DEFAULTS[name] else STATIC_BROKER_CONFIG
        synonyms = []
        if name in set_configs:
            value, source = set_configs[name], DYNAMIC_TOPIC_CONFIG
            if include_synonyms:
                synonyms.append(_Synonym(name=name, value=value, source=DYNAMIC_TOPIC_CONFIG))
        else:
            value, source = default, default_source
        if include_synonyms and name in log_config.BROKER_SYNONYMS:
            synonyms.append(_Synonym(name=log_config.BROKER_SYNONYMS[name], value=default,
                                     source=default_source))
        out.append(_entry(name, value, source, False, TOPIC_CONFIG_TYPES.get(name, UNKNOWN),
                          synonyms))
    return out


def broker_configs(config: ClusterConfig, keys, include_synonyms: bool,
                   dynamic: dict[str, dict[str, str]] | None = None,
                   resource_name: str = "") -> list[_Entry]:
    """The static configs (read-only), and the dynamic throttle rates: set for this broker
    (DYNAMIC_BROKER_CONFIG), for the cluster (DYNAMIC_DEFAULT_BROKER_CONFIG), else Kafka's
    default (Long.MAX_VALUE); synonyms list every level that has a value, most specific first."""
    values, defaults = config.describe(), ClusterConfig().describe()
    dynamic = dynamic or {}
    entries = []
    for name in sorted(values):
        value = values[name]
        source = DEFAULT_CONFIG if defaults.get(name) == value else STATIC_BROKER_CONFIG
        entries.append((name, True, [(value, source)]))
    for name in RATE_CONFIGS:
        levels = []
        if resource_name and name in dynamic.get(resource_name, {}):
            levels.append((dynamic[resource_name][name], DYNAMIC_BROKER_CONFIG))
        if name in dynamic.get("", {}):
            levels.append((dynamic[""][name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        entries.append((name, False, levels + [(str(2**63 - 1), DEFAULT_CONFIG)]))
    out = []
    for name, read_only, levels in sorted(entries):
        if keys is not None and name not in keys:
            continue
        value, source = levels[0]
        synonyms = ([_Synonym(name=name, value=v, source=s) for v, s in levels]
                    if include_synonyms else [])
        out.append(_entry(name, value, source, read_only, LONG if not read_only else UNKNOWN,
                          synonyms))
    return out


def _error(r, code: int, message: str | None) -> _Result:
    return _Result(error_code=code, error_message=message, resource_type=r.resource_type,
                   resource_name=r.resource_name, configs=[])


@handles(ApiKey.DescribeConfigs, DescribeConfigsRequest, versions=(0, 4))
async def handle_describe_configs(ctx: RequestContext, req: DescribeConfigsRequest):
    broker = ctx.broker
    synonyms = ctx.api_version >= 1 and req.include_synonyms
    results = []
    for r in req.resources:
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        if r.resource_type == TOPIC:
            reason = invalid_reason(r.resource_name)
            topic = broker.metadata.topics.get(r.resource_name)
            if reason:
                results.append(_error(r, InvalidTopicError.errno, reason))
            elif topic is None:
                results.append(_error(r, UnknownTopicOrPartitionError.errno,
                                      f"The topic '{r.resource_name}' does not exist."))
            else:
                results.append(_Result(error_code=0, error_message=None,
                                       resource_type=TOPIC, resource_name=r.resource_name,
                                       configs=topic_configs(topic.configs, keys, synonyms,
                                                              ctx.broker.log_defaults.to_configs())))
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(broker.node_id)):
                results.append(_error(r, InvalidRequestError.errno,
                                      f"Unexpected broker id, expected {broker.node_id} or empty "
                                      f"string, but received {r.resource_name}"))
            else:
                results.append(_Result(error_code=0, error_message=None,
                                       resource_type=BROKER, resource_name=r.resource_name,
                                       configs=broker_configs(broker.config, keys, synonyms,
                                                              broker.dynamic_configs,
                                                              r.resource_name)))
        else:
            results.append(_error(r, InvalidRequestError.errno,
                                  f"Unsupported resource type: {r.resource_type}"))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
