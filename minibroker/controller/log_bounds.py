"""Asking a broker for a replica's log bounds (KIP-253 removal, KIP-179 progress)."""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from kafka.errors import KafkaError
from kafka.protocol.consumer import ListOffsetsRequest

from minibroker.controller.image import BrokerRegistration
from minibroker.network.client import KafkaClientConnection

log = logging.getLogger("minibroker.controller")

Connect = Callable[[BrokerRegistration], Awaitable[KafkaClientConnection]]


async def log_bounds(connect: Connect, broker: BrokerRegistration | None, topic: str,
                     partition: int) -> tuple[int | None, int | None]:
    """(log start offset, log end offset) of a replica's log (the leader's, or any replica's):
    ListOffsets -2 / -1 as the debugging replica id, for which Kafka answers the log end offset
    rather than the high watermark, from any replica. (None, None) if it cannot answer."""
    if broker is None or broker.fenced:
        return None, None
    T = ListOffsetsRequest.ListOffsetsTopic
    out = []
    try:
        conn = await connect(broker)
        for ts in (-2, -1):
            req = ListOffsetsRequest(replica_id=-2, isolation_level=0, topics=[T(
                name=topic, partitions=[T.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=ts)])])
            resp = await conn.request(req, 7, timeout=10)
            p = resp.topics[0].partitions[0]
            if p.error_code:
                return None, None
            out.append(p.offset)
    except (OSError, asyncio.TimeoutError, KafkaError) as e:
        log.info("controller: log bounds of %s-%d from broker %d: %r", topic, partition,
                 broker.broker_id, e)
        return None, None
    return out[0], out[1]
