"""The reference asyncio client: pipelined Producer, poll-loop Consumer, Admin.

    from minibroker.client import Producer, Consumer, Admin, TopicPartition
"""
from __future__ import annotations

from minibroker.client.admin import Admin, NewTopic
from minibroker.client.consumer import Consumer
from minibroker.client.ordering_barrier import PartitionKeyRebalanceListener
from minibroker.client.metadata import TopicMetadata
from minibroker.client.producer import Producer
from minibroker.client.records import (ConsumerGroupMetadata, ConsumerRecord, RecordMetadata,
                                       TopicPartition)

__all__ = ["Producer", "Consumer", "Admin", "NewTopic", "RecordMetadata", "ConsumerRecord", "TopicPartition",
           "TopicMetadata", "PartitionKeyRebalanceListener", "ConsumerGroupMetadata"]
