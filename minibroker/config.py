"""Cluster and broker configuration. Every default lives here, under Kafka's config names."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields, replace
from typing import Any

from minibroker.log.config import BROKER_CONFIGS
from minibroker.protocol.schemas import SCHEMAS_DIR
from minibroker.security.authorizer import AUTHORIZER_CLASS_NAMES


# Kafka's ConfigDef lower bounds (atLeast) for the broker configs that have one.
_AT_LEAST = {"leader_imbalance_check_interval_seconds": 1,
             "leader_imbalance_per_broker_percentage": 0, "max_connections": 0, "max_connections_per_ip": 0, "max_partitions": 0,
             "num_partitions": 1, "default_replication_factor": 1, "min_insync_replicas": 1,
             "socket_request_max_bytes": 1, "offsets_topic_num_partitions": 1,
             "offsets_topic_replication_factor": 1, "transaction_state_log_num_partitions": 1,
             "transaction_state_log_replication_factor": 1, "transaction_state_log_min_isr": 1,
             "transaction_max_timeout_ms": 1, "transactional_id_expiration_ms": 1,
             "transaction_abort_timed_out_transaction_cleanup_interval_ms": 1,
             "offsets_retention_minutes": 1, "offsets_retention_check_interval_ms": 1,
             "log_retention_check_interval_ms": 1, "log_cleaner_backoff_ms": 0,
             "group_max_size": 1, "broker_heartbeat_interval_ms": 1,
             "controller_quorum_fetch_timeout_ms": 0, "controller_quorum_election_timeout_ms": 1,
             "replica_fetch_max_bytes": 0, "message_max_bytes": 0, "fetch_max_bytes": 0,
             "group_initial_rebalance_delay_ms": 0}


# The broker configs IncrementalAlterConfigs may change at runtime (Kafka's dynamic broker
# configs; here only the replication throttle rates, bytes/s, minibroker.broker.throttle).
LEADER_REPLICATION_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_THROTTLED_RATE = "follower.replication.throttled.rate"
DYNAMIC_BROKER_CONFIGS = (LEADER_REPLICATION_THROTTLED_RATE, FOLLOWER_REPLICATION_THROTTLED_RATE)

@functools.cache
def emulated_releases() -> tuple[str, ...]:
    """The Kafka releases `kafka_version` may name (schemas/releases/<X.Y>.json), oldest first."""
    return tuple(sorted((p.stem for p in (SCHEMAS_DIR / "releases").glob("[0-9]*.json")),
                        key=lambda v: tuple(int(x) for x in v.split("."))))


@dataclass(frozen=True)
class ClusterConfig:
    brokers: int = 3
    host: str = "127.0.0.1"
    port: int = 0                           # first broker's port; 0 = each picks a free port
    racks: tuple[str | None, ...] = ()      # broker.rack per broker id (1-based order)
    # None: unseeded — a random cluster id and the real wall clock (ids still come from seed 0).
    # Seeded: the cluster id, ids and the wall-clock base all follow from the seed, so a run repeats.
    seed: int | None = None
    cluster_id: str | None = None
    wall_clock_base_ms: int | None = None   # the Clock's start; default: from the seed, else now
    # Kafka's controller.quorum.voters: the brokers that may host the active controller (each
    # holds a copy of the metadata log); empty: every broker.
    controller_quorum_voters: tuple[int, ...] = ()
    # Kafka's log.dirs (one here): logs and metadata on disk under <data_dir>/broker-<id>; None:
    # in memory only (serve --data-dir, log/log_manager.py, controller/metadata_store.py).
    data_dir: str | None = None
    # Broker configs (Kafka names with dots → underscores).
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    socket_request_max_bytes: int = 104857600
    connections_max_idle_ms: int = 600000   # <= 0: never closed for idleness
    max_connections: int = 2147483647       # the client listener's; then accepting waits
    max_connections_per_ip: int = 2147483647
    queued_max_request_bytes: int = -1      # a pool for requests being read; -1: none (Kafka's)
    message_max_bytes: int = 1048588
    replica_lag_time_max_ms: int = 30000
    # Preferred-leader rebalancing (controller/elections.py), Kafka's names and defaults.
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    fetch_max_bytes: int = 57671680         # caps every Fetch response's max_bytes (KIP-541)
    log_retention_check_interval_ms: int = 300000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000     # how often the cleaner looks for logs to compact
    log_memory_max_bytes: int = -1          # cap on a broker's log bytes; -1: none (serve: from RAM)
    # Ours: past log.memory.max.bytes, "spill" the oldest batches to files (still readable), or
    # "delete" them, as if a retention had been set (log/memory.py).
    log_memory_overflow: str = "spill"
    # KIP-578's max.partitions (ours: the KIP was not adopted): partitions in the whole cluster.
    max_partitions: int = 2147483647
    replica_high_watermark_checkpoint_interval_ms: int = 5000   # and the other checkpoints
    # KRaft's: a metadata snapshot once this many record bytes were appended after the last one
    # (in memory too: the log before a snapshot is dropped).
    metadata_log_max_record_bytes_between_snapshots: int = 20971520
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2147483647
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_session_timeout_ms: int = 45000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    controller_quorum_fetch_timeout_ms: int = 2000
    # serve --processes: a voter that hears no leader this long stands for election (KRaft's).
    controller_quorum_election_timeout_ms: int = 1000
    max_incremental_fetch_session_cache_slots: int = 1000
    controlled_shutdown_enable: bool = True
    partition_deletion_check_interval_ms: int = 5000     # KIP-253: drained marked partitions
    reassign_partitions_status_min_retention_ms: int = 86400000   # KIP-179: finished requests
    # KIP-599: partition mutations/s per client (Kafka's `controller_mutation_rate` client quota;
    # here every client's default); inf = no quota, Kafka's default. Burst = rate * num * size.
    controller_mutation_rate: float = float("inf")
    controller_quota_window_num: int = 11
    controller_quota_window_size_seconds: int = 1
    # Our extension: how long each broker takes to apply an UpdateMetadata (Kafka's "it may take
    # several seconds after CreatePartitions returns for all the brokers to become aware").
    minibroker_metadata_propagation_delay_ms: int = 0
    # Our extension: serve's log heap in transparent huge pages (log/heap.py); off, measured slower.
    minibroker_log_heap_huge_pages: bool = False
    # Our extension: brokers of one process replicate (and the controller reaches them) over
    # loopback TCP as brokers in different processes do; false (the default), over an in-memory
    # pipe carrying the same frames (network/memory.py), without the kernel's copies.
    minibroker_inter_broker_sockets: bool = False
    # Security (docs/security.md). Kafka's listener configs: "" listeners = one PLAINTEXT listener
    # on host:port. A listener's fixed port is broker 1's; broker i adds i-1 (port 0: a free one).
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL")
    inter_broker_listener_name: str = ""
    control_plane_listener_name: str = ""
    # Kafka's default is GSSAPI, which is not served: every mechanism that is, instead.
    sasl_enabled_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
    connections_max_reauth_ms: int = 0
    connection_failed_authentication_delay_ms: int = 100
    # PEM files only (ssl.keystore.type=PEM: the private key and its certificate chain in one
    # file; ssl.truststore.type=PEM: CA certificates).
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str = ""
    ssl_keystore_password: str = ""
    ssl_key_password: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str = ""
    ssl_client_auth: str = "none"
    ssl_principal_mapping_rules: str = "DEFAULT"
    ssl_enabled_protocols: str = "TLSv1.2,TLSv1.3"
    # Kafka's names (IANA's: TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...);
    # empty: the broker's defaults, AES-128-GCM first (network/tls.py).
    ssl_cipher_suites: str = ""
    # Authorization (KIP-11): the authorizer is on when authorizer.class.name names one of Kafka's
    # (minibroker.security.authorizer.AUTHORIZER_CLASS_NAMES); empty, as Kafka's default: off.
    authorizer_class_name: str = ""
    super_users: str = ""                   # "User:a;User:b": allowed everything
    allow_everyone_if_no_acl_found: bool = False
    # Ours: "NAME:PASSWORD" users created at start (a PLAIN password and both SCRAM credentials).
    users: tuple[str, ...] = ()
    # Ours: set (serve --processes: random, handed to the broker processes), the brokers'
    # control-plane TCP listeners authenticate the controller with SASL/SCRAM-SHA-512.
    minibroker_control_plane_password: str = ""
    # Our extension: emulate this Kafka release's ApiVersions ("2.8"; None: every API we serve;
    # minibroker/broker/releases.py, schemas/releases/).
    kafka_version: str | None = None
    # Our extension: a JSON line per client request and response to this path ("-": stderr;
    # minibroker/broker/trace.py, `minibroker trace FILE` reads it).
    trace: str | None = None
    # Our extension: record each protocol rule a client breaks (minibroker/broker/strict.py);
    # serving is unchanged. Storm thresholds: requests per second per client without a change.
    strict: bool = False
    strict_storm_per_second: int = 20
    extra: dict[str, str] = field(default_factory=dict)   # log.* topic synonyms, by Kafka name

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem:
            raise ValueError(problem)

    def problem(self) -> str | None:
        """What is wrong with this configuration, in Kafka's ConfigException wording, or None."""
        if self.brokers < 1:
            return f"Invalid value {self.brokers} for brokers: Value must be at least 1"
        if len(self.racks) > self.brokers:
            return f"{len(self.racks)} racks given for {self.brokers} brokers"
        bad = [v for v in self.controller_quorum_voters if not 1 <= v <= self.brokers]
        if bad:
            return (f"Invalid value {bad[0]} for configuration controller.quorum.voters: "
                    f"not a broker id (1-{self.brokers})")
        if not 0 <= self.port <= 65536 - self.brokers:
            return f"Invalid port {self.port} for {self.brokers} brokers: ports are 0-65535"
        for kname, fname in self.kafka_names().items():
            value, default = getattr(self, fname), getattr(ClusterConfig, fname)
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    return (f"Invalid value {value} for configuration {kname}: "
                            "Expected value to be either true or false")
            elif not isinstance(default, int):
                continue
            elif not isinstance(value, (int, float)) or isinstance(value, bool):
                return f"Invalid value {value} for configuration {kname}: Not a number of type INT"
            elif fname in _AT_LEAST and value < _AT_LEAST[fname]:
                return (f"Invalid value {value} for configuration {kname}: "
                        f"Value must be at least {_AT_LEAST[fname]}")
        if self.authorizer_class_name and \
                self.authorizer_class_name not in AUTHORIZER_CLASS_NAMES:
            return (f"Invalid value {self.authorizer_class_name} for configuration "
                    f"authorizer.class.name: Class {self.authorizer_class_name} cannot be found")
        if self.control_plane_listener_name:
            # Refused rather than ignored: the control plane is never a client listener here.
            return ("control.plane.listener.name is not supported: the controller reaches brokers "
                    "over in-memory pipes in one process, and over a SCRAM-authenticated control "
                    "plane of its own with serve --processes (docs/security.md)")
        if self.ssl_client_auth not in ("required", "requested", "none"):
            return (f"Invalid value {self.ssl_client_auth} for configuration ssl.client.auth: "
                    "String must be one of: required, requested, none")
        if self.log_memory_overflow not in ("spill", "delete"):
            return (f"Invalid value {self.log_memory_overflow} for configuration "
                    "log.memory.overflow: String must be one of: spill, delete")
        if self.kafka_version is not None and self.kafka_version not in emulated_releases():
            return (f"Invalid value {self.kafka_version} for kafka version: emulated releases "
                    f"are {', '.join(emulated_releases())}")
        unknown = sorted(set(self.extra) - BROKER_CONFIGS)
        if unknown:
            return f"Unknown broker config {unknown[0]}"
        return None

    def quorum_voters(self) -> list[int]:
        return sorted(set(self.controller_quorum_voters)) or list(range(1, self.brokers + 1))

    def rack_of(self, broker_id: int) -> str | None:
        return self.racks[broker_id - 1] if broker_id - 1 < len(self.racks) else None

    def with_overrides(self, **kw: Any) -> "ClusterConfig":
        return replace(self, **kw)

    @classmethod
    def kafka_names(cls) -> dict[str, str]:
        """Kafka config name → field name, for the CLI's --override and DescribeConfigs."""
        skip = {"brokers", "host", "port", "racks", "seed", "cluster_id", "wall_clock_base_ms",
                "controller_quorum_voters", "extra", "data_dir",
                "kafka_version", "trace", "strict", "strict_storm_per_second", "users",
                "minibroker_control_plane_password"}
        return {f.name.replace("_", "."): f.name for f in fields(cls) if f.name not in skip}

    def describe(self) -> dict[str, str]:
        out = {}
        for kname, fname in self.kafka_names().items():
            v = getattr(self, fname)
            out[kname] = str(v).lower() if isinstance(v, bool) else str(v)
        out.update(self.extra)
        return out
