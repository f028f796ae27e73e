"""Kafka's dynamic broker configs (KIP-226): which broker configs AlterConfigs and
IncrementalAlterConfigs may change at runtime, per broker or as the cluster default, and the
checks Kafka makes before it stores them (DynamicBrokerConfig, DynamicConfig.Broker).

- ALL_DYNAMIC: DynamicBrokerConfig.AllDynamicConfigs — SSL keystores, LogCleaner, the log.*
  synonyms of topic configs (DynamicLogConfig, all but message.format.version), thread pools,
  metric.reporters, listeners (DynamicListenerConfig), connection limits (SocketServer),
  producer-state and remote-log settings, and the replication throttle rates.
- PER_BROKER: (security ∪ listener configs) − the cluster-level listener configs: these need a
  broker id and cannot be a cluster default.
- `listener.name.<listener>.<config>` of a per-listener config is dynamic too (per broker).
Any other config Kafka knows is read-only ("Cannot update these configs dynamically"); a name
Kafka does not know is refused as unknown.
"""
from __future__ import annotations

import re

from minibroker.config import DYNAMIC_BROKER_CONFIGS as RATE_CONFIGS
from minibroker.log import config as log_config

SSL_RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})
LOG_CLEANER = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms"})
# DynamicLogConfig: the broker synonyms of every topic config but message.format.version.
DYNAMIC_LOG = frozenset(d.synonyms[0] for n, d in log_config.TOPIC_CONFIGS.items()
                        if d.synonyms and n != "message.format.version")
THREAD_POOLS = frozenset({"num.io.threads", "num.replica.fetchers",
                          "num.recovery.threads.per.data.dir", "background.threads"})
LISTENER = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate"})
SOCKET_SERVER = frozenset({"max.connections.per.ip", "max.connections.per.ip.overrides",
                           "max.connections", "max.connection.creation.rate"})
PRODUCER_STATE = frozenset({"producer.id.expiration.ms",
                            "transaction.partition.verification.enable"})
REMOTE_LOG = frozenset({
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second", "remote.list.offsets.request.timeout.ms"})
CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate",
                                    "num.network.threads"})

ALL_DYNAMIC = (SSL_RECONFIGURABLE | LOG_CLEANER | DYNAMIC_LOG | THREAD_POOLS
               | {"metric.reporters"} | LISTENER | SOCKET_SERVER | PRODUCER_STATE | REMOTE_LOG
               | frozenset(RATE_CONFIGS))
PER_BROKER = (SSL_RECONFIGURABLE | LISTENER) - CLUSTER_LEVEL_LISTENER
_LISTENER_PREFIXED = re.compile(r"listener\.name\.[^.]+\.(.+)")

# Value checks for the dynamic configs with a numeric type in Kafka (name -> (type, at least)).
_NUMERIC = {
    "background.threads": ("INT", 1), "num.io.threads": ("INT", 1),
    "num.replica.fetchers": ("INT", 1), "num.recovery.threads.per.data.dir": ("INT", 1),
    "num.network.threads": ("INT", 1), "log.cleaner.threads": ("INT", 0),
    "log.cleaner.dedupe.buffer.size": ("LONG", None), "log.cleaner.io.buffer.size": ("INT", 0),
    "log.cleaner.io.buffer.load.factor": ("DOUBLE", None),
    "log.cleaner.io.max.bytes.per.second": ("DOUBLE", None), "log.cleaner.backoff.ms": ("LONG", 0),
    "max.connections": ("INT", 0), "max.connections.per.ip": ("INT", 0),
    "max.connection.creation.rate": ("INT", 0), "producer.id.expiration.ms": ("INT", 1),
    "sasl.kerberos.min.time.before.relogin": ("LONG", None),
    "sasl.kerberos.ticket.renew.window.factor": ("DOUBLE", None),
    "sasl.kerberos.ticket.renew.jitter": ("DOUBLE", None),
    "sasl.login.refresh.window.factor": ("DOUBLE", None),
    "sasl.login.refresh.window.jitter": ("DOUBLE", None),
    "sasl.login.refresh.min.period.seconds": ("SHORT", None),
    "sasl.login.refresh.buffer.seconds": ("SHORT", None),
    "remote.fetch.max.wait.ms": ("INT", 1), "remote.list.offsets.request.timeout.ms": ("LONG", 1),
    "leader.replication.throttled.rate": ("LONG", 0),
    "follower.replication.throttled.rate": ("LONG", 0),
}
# Log-config synonyms: checked as the topic config they give the default of.
_TOPIC_OF = {d.synonyms[0]: n for n, d in log_config.TOPIC_CONFIGS.items() if d.synonyms}
# Broker configs Kafka knows but keeps read-only (a sample the error names; any other known
# name is read-only too).
LIST_CONFIGS = frozenset({"log.cleanup.policy", "metric.reporters", "listeners",
                          "advertised.listeners", "sasl.enabled.mechanisms",
                          "ssl.cipher.suites", "ssl.enabled.protocols",
                          "sasl.kerberos.principal.to.local.rules"})


def base_name(name: str) -> str:
    """listener.name.<l>.<config> -> <config>; anything else unchanged."""
    m = _LISTENER_PREFIXED.fullmatch(name)
    return m.group(1) if m else name


def is_dynamic(name: str) -> bool:
    m = _LISTENER_PREFIXED.fullmatch(name)
    return (m.group(1) in PER_BROKER or m.group(1) in SOCKET_SERVER) if m else name in ALL_DYNAMIC


def is_per_broker(name: str) -> bool:
    m = _LISTENER_PREFIXED.fullmatch(name)
    return (m.group(1) not in CLUSTER_LEVEL_LISTENER) if m else name in PER_BROKER


def check_value(name: str, value: str) -> str | None:
    """Kafka's message for an invalid value of dynamic config `name`, else None."""
    name = base_name(name)
    if name in _TOPIC_OF:
        try:
            log_config.validate(_TOPIC_OF[name], value)
        except ValueError as e:
            return str(e).replace(_TOPIC_OF[name], name)
        return None
    kind = _NUMERIC.get(name)
    if kind is None:
        return None
    typ, least = kind
    try:
        number = float(value) if typ == "DOUBLE" else int(value.strip())
    except ValueError:
        return f"Invalid value {value} for configuration {name}: Not a number of type {typ}"
    if least is not None and number < least:
        return f"Invalid value {value} for configuration {name}: Value must be at least {least}"
    return None
