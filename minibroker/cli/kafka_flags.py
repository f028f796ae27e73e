"""The flags of Kafka 4.x's command-line tools, by minibroker subcommand, as their option classes
define them (TopicCommand, ConsumerGroupCommandOptions, ConfigCommand, TransactionsCommand,
ReassignPartitionsCommandOptions, LeaderElectionCommand, GetOffsetShell, DeleteRecordsCommand,
LogDirsCommand, MetadataQuorumCommand, FeatureCommand, ConsoleProducer, ConsoleConsumerOptions).
`python -m minibroker.cli.doc` compares them with the subcommands' parsers for docs/cli.md.
A subcommand's own subcommands (transactions list, features upgrade, ...) are written "name".
"""
from __future__ import annotations

KAFKA_TOOLS: dict[str, tuple[str, ...]] = {
    "topics": (
        "--bootstrap-server", "--command-config", "--list", "--create", "--delete", "--alter",
        "--describe", "--topic", "--topic-id", "--config", "--delete-config", "--partitions",
        "--replication-factor", "--replica-assignment", "--under-replicated-partitions",
        "--unavailable-partitions", "--under-min-isr-partitions", "--at-min-isr-partitions",
        "--topics-with-overrides", "--if-exists", "--if-not-exists", "--exclude-internal",
        "--partition-size-limit-per-response"),
    "consumer-groups": (
        "--bootstrap-server", "--group", "--topic", "--all-topics", "--list", "--describe",
        "--all-groups", "--delete", "--timeout", "--command-config", "--reset-offsets",
        "--delete-offsets", "--dry-run", "--execute", "--export", "--to-offset", "--from-file",
        "--to-datetime", "--by-duration", "--to-earliest", "--to-latest", "--to-current",
        "--shift-by", "--members", "--verbose", "--offsets", "--state", "--type"),
    "configs": (
        "--zookeeper", "--bootstrap-server", "--bootstrap-controller", "--command-config",
        "--alter", "--describe", "--all", "--entity-type", "--entity-name", "--entity-default",
        "--add-config", "--add-config-file", "--delete-config", "--force", "--topic", "--client",
        "--client-defaults", "--user", "--user-defaults", "--broker", "--broker-defaults",
        "--broker-logger", "--ip-defaults", "--ip", "--group", "--client-metrics",
        "--zk-tls-config-file"),
    "transactions": (
        "--bootstrap-server", "--command-config", "list", "describe", "describe-producers",
        "abort", "find-hanging", "--topic", "--partition", "--start-offset", "--producer-id",
        "--producer-epoch", "--coordinator-epoch", "--broker-id", "--transactional-id",
        "--duration-filter", "--max-transaction-timeout"),
    "reassign-partitions": (
        "--verify", "--generate", "--execute", "--cancel", "--list", "--bootstrap-server",
        "--command-config", "--reassignment-json-file", "--topics-to-move-json-file",
        "--broker-list", "--bootstrap-controller", "--disable-rack-aware", "--throttle",
        "--replica-alter-log-dirs-throttle", "--timeout", "--additional", "--preserve-throttles"),
    "leader-election": (
        "--bootstrap-server", "--admin.config", "--path-to-json-file", "--topic", "--partition",
        "--all-topic-partitions", "--election-type"),
    "get-offsets": (
        "--bootstrap-server", "--topic-partitions", "--topic", "--partitions", "--time",
        "--command-config", "--exclude-internal-topics"),
    "delete-records": ("--bootstrap-server", "--offset-json-file", "--command-config"),
    "log-dirs": ("--bootstrap-server", "--command-config", "--describe", "--topic-list",
                 "--broker-list"),
    "metadata-quorum": (
        "--bootstrap-server", "--bootstrap-controller", "--command-config", "describe",
        "--status", "--replication", "--human-readable", "add-controller", "remove-controller",
        "--controller-id", "--controller-directory-id", "--dry-run"),
    "features": (
        "--bootstrap-server", "--bootstrap-controller", "--command-config", "describe",
        "upgrade", "downgrade", "disable", "version-mapping", "feature-dependencies",
        "--metadata", "--release-version", "--feature", "--unsafe", "--dry-run"),
    "console-producer": (
        "--topic", "--bootstrap-server", "--sync", "--compression-codec", "--batch-size",
        "--message-send-max-retries", "--retry-backoff-ms", "--timeout",
        "--request-required-acks", "--request-timeout-ms", "--metadata-expiry-ms",
        "--max-block-ms", "--max-memory-bytes", "--max-partition-memory-bytes", "--line-reader",
        "--socket-buffer-size", "--property", "--reader-config", "--producer-property",
        "--producer.config"),
    "console-consumer": (
        "--topic", "--include", "--partition", "--offset", "--consumer-property", "--formatter",
        "--property", "--formatter-config", "--from-beginning", "--max-messages", "--timeout-ms",
        "--skip-message-on-error", "--bootstrap-server", "--key-deserializer",
        "--value-deserializer", "--enable-systest-events", "--isolation-level", "--group",
        "--consumer.config"),
}
