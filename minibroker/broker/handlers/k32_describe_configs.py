"""DescribeConfigs (key 32), v0-4.

TOPIC resources (type 2): every topic config (minibroker.log.config.DEFAULTS), its value set on the
topic (DYNAMIC_TOPIC_CONFIG) or the default: the broker's log.* synonym when set
(STATIC_BROKER_CONFIG), else Kafka's (DEFAULT_CONFIG); values from this broker's metadata cache
(the controller sends topic configs with UpdateMetadata). BROKER resources (type 4, name = this
broker's id, or "" for cluster defaults): the broker's ClusterConfig.describe(), read-only, source
STATIC_BROKER_CONFIG where it differs from the default. configuration_keys filters (unknown names
are left out, as in Kafka).
v0: is_default.  v1: config_source, synonyms (with include_synonyms: the topic-level value if set,
then the broker-level synonym when set, then Kafka's default under the first broker synonym, e.g.
log.retention.ms).  v3: config_type, documentation (with include_documentation).  v4: flexible.
Every Kafka 4.x topic config is described (minibroker.log.config.TOPIC_CONFIGS); brokers also
describe broker.id, node.id, broker.rack (null without a rack), listeners and the topic defaults
under their broker names (log.retention.ms, ...).
GROUP resources (type 32, Kafka 4.0+; KIP-848 group configs): every Kafka group config, the
group's value (GROUP_CONFIG) or its broker synonym's (STATIC_BROKER_CONFIG when the broker sets
it, else DEFAULT_CONFIG), for any group id, as Kafka's ConfigHelper.createGroupConfigEntry.
Not implemented: BROKER_LOGGER resources.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeAlias, cast

from kafka.errors import InvalidRequestError, InvalidTopicError, UnknownTopicOrPartitionError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from minibroker.broker.context import RequestContext, Services
from minibroker.broker.dispatch import handles
from minibroker.broker.handlers.k33_alter_configs import group_configs_served
from minibroker.config import DYNAMIC_BROKER_CONFIGS as RATE_CONFIGS
from minibroker.protocol.topic_names import invalid_reason
from minibroker.config import ClusterConfig
from minibroker.controller import dynamic_broker_configs as dyn
from minibroker.controller import group_configs as groups
from minibroker.log import config as log_config

_Result: TypeAlias = DescribeConfigsResponse.DescribeConfigsResult
_Entry: TypeAlias = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym

TOPIC, BROKER, GROUP = 2, 4, 32
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
# Kafka's ConfigDef types (DescribeConfigsResponse.ConfigType).
UNKNOWN, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 0, 1, 2, 3, 4, 5, 6, 7
_TYPES = {"BOOLEAN": BOOLEAN, "STRING": STRING, "INT": INT, "SHORT": SHORT, "LONG": LONG,
          "DOUBLE": DOUBLE, "LIST": LIST}
TOPIC_CONFIG_TYPES = {name: _TYPES[d.type] for name, d in log_config.TOPIC_CONFIGS.items()}
# Read-only broker configs every Kafka broker describes, beyond ClusterConfig's own.
BROKER_DOCS = {
    "broker.id": "The broker id of this server.",
    "node.id": "The node id of this server in the KRaft cluster.",
    "broker.rack": "Rack of the broker, for rack-aware replica placement and fetching from the "
                   "closest replica (KIP-392).",
    "process.roles": "The roles this process plays: broker, controller, or both.",
    "listeners": "The addresses the broker listens on.",
    "advertised.listeners": "The addresses the broker gives clients.",
    "replica.selector.class": "The ReplicaSelector that picks the preferred read replica.",
}


def _entry(name: str, value: str | None, source: int, read_only: bool, config_type: int,
           synonyms: list[Any], doc: str | None = None) -> _Entry:
    sensitive = name.endswith(".password")      # Kafka's PASSWORD configs: never described
    return _Entry(name=name, value=None if sensitive else value, read_only=read_only,
                  config_source=source, is_default=source == DEFAULT_CONFIG,
                  is_sensitive=sensitive, synonyms=synonyms,
                  config_type=config_type, documentation=doc)


def topic_configs(set_configs: dict[str, str], keys: Collection[str] | None,
                  include_synonyms: bool, broker_configs: Mapping[str, str | None],
                  include_docs: bool = False) -> list[_Entry]:
    """`broker_configs`: the broker's configs (its log.* synonyms give the topic defaults).
    Synonyms as Kafka lists them: the topic's own value, the broker synonym set, then the
    default under the first broker synonym's name."""
    out = []
    for name in sorted(log_config.DEFAULTS):
        if keys is not None and name not in keys:
            continue
        definition = log_config.TOPIC_CONFIGS[name]
        kafka_default = log_config.DEFAULTS[name]
        # (None is broker.rack's alone, no topic config's synonym: the synonyms read are str)
        found = log_config.broker_value(name, cast("Mapping[str, str]", broker_configs))
        if found is not None and found[1] != kafka_default:
            default, default_source = found[1], STATIC_BROKER_CONFIG
        else:
            default, default_source = kafka_default, DEFAULT_CONFIG
        synonyms: list[Any] = []
        if name in set_configs:
            value, source = set_configs[name], DYNAMIC_TOPIC_CONFIG
            if include_synonyms:
                synonyms.append(_Synonym(name=name, value=value, source=DYNAMIC_TOPIC_CONFIG))
        else:
            value, source = default, default_source
        if include_synonyms and definition.synonyms:
            if found is not None and default_source == STATIC_BROKER_CONFIG:
                synonyms.append(_Synonym(name=found[0], value=broker_configs[found[0]],
                                         source=STATIC_BROKER_CONFIG))
            synonyms.append(_Synonym(name=definition.synonyms[0], value=kafka_default,
                                     source=DEFAULT_CONFIG))
        out.append(_entry(name, value, source, False, TOPIC_CONFIG_TYPES[name], synonyms,
                          definition.doc if include_docs else None))
    return out


def broker_values(services: Services) -> dict[str, str | None]:
    """What a broker describes read-only: its ClusterConfig, the topic defaults under their broker
    names, and its identity (broker.id, node.id, broker.rack, listeners)."""
    values: dict[str, str | None] = {}
    node = services.node
    topic_defaults = services.log_defaults.to_configs()
    for name, definition in log_config.TOPIC_CONFIGS.items():
        if definition.synonyms:
            values[definition.synonyms[0]] = topic_defaults[name]
    values.update(services.config.describe())
    listeners, advertised_listeners = node.listener_configs()
    values.update({"broker.id": str(node.node_id), "node.id": str(node.node_id),
                   "broker.rack": node.rack, "process.roles": "broker",
                   "listeners": listeners, "advertised.listeners": advertised_listeners,
                   "replica.selector.class":
                       "org.apache.kafka.common.replica.RackAwareReplicaSelector"})
    return values


def broker_configs(services: Services, keys: Collection[str] | None, include_synonyms: bool,
                   include_docs: bool = False, resource_name: str = "") -> list[_Entry]:
    """The static configs, and the dynamic ones (KIP-226) where set: for this broker
    (DYNAMIC_BROKER_CONFIG), for the cluster (DYNAMIC_DEFAULT_BROKER_CONFIG), over the static
    value or Kafka's default; synonyms list every level that has a value, most specific first.
    Configs Kafka cannot change at runtime are read-only."""
    values, defaults = broker_values(services), ClusterConfig().describe()
    dynamic = services.node.dynamic_configs or {}
    levels_of: dict[str, list[tuple[str | None, int]]] = {}
    for name in sorted(values):
        value = values[name]
        source = (STATIC_BROKER_CONFIG if name in BROKER_DOCS and value is not None
                  or name in services.config.extra
                  or name in defaults and defaults[name] != value else DEFAULT_CONFIG)
        levels_of[name] = [(value, source)]
    for name in RATE_CONFIGS:
        levels_of[name] = [(str(2**63 - 1), DEFAULT_CONFIG)]
    mine = dynamic.get(resource_name, {}) if resource_name else {}
    for name in sorted(set(mine) | set(dynamic.get("", {}))):
        levels: list[tuple[str | None, int]] = \
            [(mine[name], DYNAMIC_BROKER_CONFIG)] if name in mine else []
        if name in dynamic.get("", {}):
            levels.append((dynamic[""][name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        levels_of[name] = levels + levels_of.get(name, [])
    out = []
    for name, levels in sorted(levels_of.items()):
        if keys is not None and name not in keys:
            continue
        value, source = levels[0]
        read_only = not dyn.is_dynamic(name)
        synonyms = ([_Synonym(name=name, value=v, source=s) for v, s in levels]
                    if include_synonyms else [])
        doc = BROKER_DOCS.get(name, "") if include_docs else None
        out.append(_entry(name, value, source, read_only,
                          LONG if name in RATE_CONFIGS else UNKNOWN, synonyms, doc))
    return out


def group_config_entries(config: ClusterConfig, set_configs: dict[str, str],
                         keys: Collection[str] | None, include_synonyms: bool,
                         include_docs: bool = False) -> list[_Entry]:
    out = []
    for name, key in sorted(groups.KEYS.items()):
        if keys is not None and name not in keys:
            continue
        default, static = groups.broker_value(config, key)
        levels = [(name, set_configs[name], GROUP_CONFIG)] if name in set_configs else []
        levels.append((key.synonym, default, STATIC_BROKER_CONFIG if static else DEFAULT_CONFIG))
        value, source = levels[0][1], levels[0][2]
        synonyms = ([_Synonym(name=n, value=v, source=src) for n, v, src in levels]
                    if include_synonyms else [])
        out.append(_entry(name, value, source, False, _TYPES[key.type], synonyms,
                          key.doc if include_docs else None))
    return out


def _error(r: Any, code: int, message: str | None) -> _Result:
    return _Result(error_code=code, error_message=message, resource_type=r.resource_type,
                   resource_name=r.resource_name, configs=[])


@handles(ApiKey.DescribeConfigs, DescribeConfigsRequest, versions=(0, 4))
async def handle_describe_configs(ctx: RequestContext, req: DescribeConfigsRequest
        ) -> DescribeConfigsResponse:
    synonyms = ctx.api_version >= 1 and req.include_synonyms
    results = []
    for r in req.resources:
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        docs = ctx.api_version >= 3 and bool(req.include_documentation)
        if r.resource_type == TOPIC:
            reason = invalid_reason(r.resource_name)
            topic = ctx.metadata.topics.get(r.resource_name)
            if reason:
                results.append(_error(r, InvalidTopicError.errno, reason))
            elif topic is None:
                results.append(_error(r, UnknownTopicOrPartitionError.errno,
                                      f"The topic '{r.resource_name}' does not exist."))
            else:
                results.append(_Result(error_code=0, error_message=None,
                                       resource_type=TOPIC, resource_name=r.resource_name,
                                       configs=topic_configs(topic.configs, keys, synonyms,
                                                              broker_values(ctx.services), docs)))
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(ctx.node_id)):
                results.append(_error(r, InvalidRequestError.errno,
                                      f"Unexpected broker id, expected {ctx.node_id} or empty "
                                      f"string, but received {r.resource_name}"))
            else:
                results.append(_Result(error_code=0, error_message=None,
                                       resource_type=BROKER, resource_name=r.resource_name,
                                       configs=broker_configs(ctx.services, keys, synonyms, docs,
                                                              r.resource_name)))
        elif r.resource_type == GROUP and group_configs_served(ctx):
            set_configs = await ctx.controller.describe_group_configs(r.resource_name)
            results.append(_Result(error_code=0, error_message=None, resource_type=GROUP,
                                   resource_name=r.resource_name,
                                   configs=group_config_entries(ctx.services.config, set_configs,
                                                                keys, synonyms, docs)))
        else:
            results.append(_error(r, InvalidRequestError.errno,
                                  f"Unsupported resource type: {r.resource_type}"))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
