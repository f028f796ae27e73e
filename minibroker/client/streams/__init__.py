"""KIP-878's reference implementation: statically partitioned stream apps that scale out with
their input topics (see the README's "Streams" section).

    from minibroker.client.streams import KafkaStreams, StreamsBuilder, LinearHashingPartitioner
"""
from __future__ import annotations

from minibroker.client.streams.errors import (INCOMPLETE_SOURCE_TOPIC_METADATA, AssignmentError,
                                              MissingSourceTopicError, StreamsError)
from minibroker.client.streams.metrics import MetricName, Metrics
from minibroker.client.streams.partitioner import LinearHashingPartitioner, StaticStreamPartitioner
from minibroker.client.streams.runner import KafkaStreams
from minibroker.client.streams.topology import KStream, StreamsBuilder, SubTopology, Topology

__all__ = ["KafkaStreams", "StreamsBuilder", "KStream", "Topology", "SubTopology",
           "StaticStreamPartitioner", "LinearHashingPartitioner", "Metrics", "MetricName",
           "StreamsError", "MissingSourceTopicError", "AssignmentError",
           "INCOMPLETE_SOURCE_TOPIC_METADATA"]
