"""Which options format("minibroker") honours, and why it refuses the rest (docs/spark.md's table).

Spark's own Kafka connector ignores options it does not know; here an unknown option is an error
naming the nearest valid one, and an option Spark's connector honours but minibroker's reference
client cannot is refused saying why, never accepted and ignored.
"""
from __future__ import annotations

import difflib

# Spark's documented source options, lower-cased as Spark hands them over; and minibroker's own.
SOURCE = ("assign", "subscribe", "subscribepattern", "kafka.bootstrap.servers",
          "startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets",
          "startingoffsetsbytimestampstrategy", "endingtimestamp", "endingoffsetsbytimestamp",
          "endingoffsets", "failondataloss", "maxoffsetspertrigger", "minoffsetspertrigger",
          "maxtriggerdelay", "minpartitions", "maxrecordsperpartition", "includeheaders",
          "ordereddelivery")
SINK = ("kafka.bootstrap.servers", "topic", "includeheaders", "exactlyonce")
# Options Spark itself adds or that belong to the query, not the connector.
SPARK = ("path", "checkpointlocation", "queryname")

SECURITY = ("kafka.security.protocol", "kafka.ssl.ca.location", "kafka.ssl.truststore.location",
            "kafka.ssl.truststore.type", "kafka.ssl.certificate.location",
            "kafka.ssl.key.location", "kafka.ssl.endpoint.identification.algorithm",
            "kafka.sasl.mechanism", "kafka.sasl.jaas.config")
KAFKA_SOURCE = ("kafka.request.timeout.ms", "kafka.fetch.max.bytes", "kafka.client.id") + SECURITY
KAFKA_SINK = ("kafka.acks", "kafka.compression.type", "kafka.batch.size",
              "kafka.request.timeout.ms", "kafka.max.in.flight.requests.per.connection",
              "kafka.client.id") + SECURITY

_SERDE = ("as {what} are {how} as byte arrays with ByteArray{cls}. Use DataFrame operations to "
          "explicitly {how2} the {what}")
REFUSED = {
    # Spark's connector refuses these too, with these reasons.
    "kafka.key.deserializer": _SERDE.format(what="keys", how="deserialized", cls="Deserializer",
                                            how2="deserialize"),
    "kafka.value.deserializer": _SERDE.format(what="values", how="deserialized",
                                              cls="Deserializer", how2="deserialize"),
    "kafka.key.serializer": _SERDE.format(what="keys", how="serialized", cls="Serializer",
                                          how2="serialize"),
    "kafka.value.serializer": _SERDE.format(what="values", how="serialized", cls="Serializer",
                                            how2="serialize"),
    "kafka.enable.auto.commit": "the source commits no offsets: they live in the checkpoint",
    "kafka.auto.offset.reset": "set startingOffsets instead",
    "kafka.interceptor.classes": "a Python client runs no Java interceptors",
    # Spark's connector honours these; minibroker's reference client has no equivalent.
    "kafka.group.id": "the source reads without a consumer group (no group to name)",
    "groupidprefix": "the source reads without a consumer group (no group to name)",
    "kafkaconsumer.polltimeoutms": "the reader has no poll loop; fetches time out after "
                                   "kafka.request.timeout.ms",
    "fetchoffset.numretries": "offset lookups retry until kafka.request.timeout.ms",
    "fetchoffset.retryintervalms": "offset lookups retry until kafka.request.timeout.ms",
    "kafka.ssl.keystore.location": "give the client certificate as PEM: "
                                   "kafka.ssl.certificate.location and kafka.ssl.key.location",
    "kafka.ssl.keystore.password": "JKS/PKCS12 keystores are not read; use PEM files",
    "kafka.ssl.key.password": "encrypted private keys are not supported; use an unencrypted PEM",
    "kafka.ssl.truststore.password": "JKS/PKCS12 truststores are not read; use a PEM "
                                     "(kafka.ssl.truststore.type=PEM)",
    "kafka.enable.idempotence": "the sink is always idempotent at acks=all and cannot be at "
                                "acks 0/1",
    "kafka.linger.ms": "the sink encodes whole record batches (kafka.batch.size) from each Arrow "
                       "batch and sends them at once: there is nothing to linger for",
    "kafka.transactional.id": "set exactlyOnce=true: the sink derives transactional ids per task",
}


class OptionError(ValueError):
    """An option format("minibroker") does not know, or refuses."""


def check(options: dict, kind: str) -> None:
    """Raise OptionError for the first unknown or refused option of `kind` (source | sink)."""
    valid = set(SPARK) | set(SOURCE if kind == "source" else SINK) | \
        set(KAFKA_SOURCE if kind == "source" else KAFKA_SINK)
    for name in sorted(options):
        key = name.lower()
        if key in valid:
            continue
        if key in REFUSED:
            raise OptionError(f"option '{name}' is not supported: {REFUSED[key]}")
        other = set(SOURCE if kind == "sink" else SINK) | \
            set(KAFKA_SINK if kind == "source" else KAFKA_SOURCE)
        if key in other:
            raise OptionError(f"option '{name}' applies to the {'sink' if kind == 'source' else 'source'}"
                              f", not to a {'read' if kind == 'source' else 'write'}")
        near = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.5)
        hint = f"; did you mean '{_spelled(near[0])}'?" if near else ""
        what = "Kafka client property" if key.startswith("kafka.") else "option"
        raise OptionError(f"unknown {what} '{name}' for a minibroker {kind}{hint}")


_CASED = {k.lower(): k for k in (
    "subscribePattern", "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets",
    "startingOffsetsByTimestampStrategy", "endingTimestamp", "endingOffsetsByTimestamp",
    "endingOffsets", "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition", "includeHeaders",
    "orderedDelivery", "exactlyOnce", "checkpointLocation", "queryName")}


def _spelled(key: str) -> str:
    return _CASED.get(key, key)
