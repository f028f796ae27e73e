"""Broker registration and fencing as controller operations (Kafka's ClusterControlManager).

Plain functions of the frozen image returning Result(records, response); a broker's partitions
change leader or ISR in the same records as its registration or fencing.
"""
from __future__ import annotations

from typing import Any

from minibroker.controller import records
from minibroker.controller.image import MetadataImage
from minibroker.controller.result import Result


def register_broker(image: MetadataImage, broker_id: int, host: str, port: int,
                    rack: str | None, control_port: int = -1,
                    listeners: records.Listeners = ()) -> Result[int]:
    """Register (or re-register) and unfence; response: the broker epoch. A new broker's epoch is
    the offset of its RegisterBrokerRecord, as in KRaft; a returning one's is one higher."""
    prev = image.brokers.get(broker_id)
    epoch = (prev.broker_epoch + 1) if prev else image.offset + 1
    out = [records.register_broker(broker_id, epoch, host, port, rack, control_port,
                                   # lists from JSON too, made tuples
                                   tuple(map(tuple, listeners))),  # type: ignore[arg-type]
           records.unfence_broker(broker_id, epoch)]
    return Result(tuple(out + _leaderless_led_by(image, broker_id)), epoch)


def unfence_broker(image: MetadataImage, broker_id: int, broker_epoch: int) -> Result[bool]:
    """A heartbeat from a registered broker (KRaft's BrokerHeartbeat): unfence it if it was
    fenced; response False if `broker_epoch` is not its registration's (it registers again)."""
    b = image.brokers.get(broker_id)
    if b is None or b.broker_epoch != broker_epoch:
        return Result((), False)
    if not b.fenced:
        return Result((), True)
    out = [records.unfence_broker(broker_id, broker_epoch)]
    return Result(tuple(out + _leaderless_led_by(image, broker_id)), True)


def _leaderless_led_by(image: MetadataImage, broker_id: int) -> list[Any]:
    """Partitions left without a leader that this broker is in sync for get it back."""
    out: list[Any] = []
    for name in sorted(image.topics):
        t = image.topics[name]
        for pid, p in t.partitions.items():
            if p.leader == -1 and broker_id in p.isr:
                out.append(records.partition_change(t.topic_id, pid, leader=broker_id))
    return out


def fence_broker(image: MetadataImage, broker_id: int) -> Result[None]:
    """Fence a broker that stopped: its leaderships move to another live in-sync replica (none:
    leader -1, the ISR keeps the last replica) and it leaves every ISR it is not alone in."""
    b = image.brokers.get(broker_id)
    if b is None or b.fenced:
        return Result((), None)
    out = [records.fence_broker(broker_id, b.broker_epoch)]
    alive = {x.broker_id for x in image.live_brokers()} - {broker_id}
    for name in sorted(image.topics):
        t = image.topics[name]
        for pid, p in t.partitions.items():
            if broker_id not in p.replicas:
                continue
            if p.leader == broker_id:
                new_leader = next((r for r in p.replicas if r in p.isr and r in alive), -1)
                isr = [r for r in p.isr if r != broker_id] or [broker_id]
                out.append(records.partition_change(t.topic_id, pid, leader=new_leader, isr=isr))
            elif broker_id in p.isr and len(p.isr) > 1:
                out.append(records.partition_change(
                    t.topic_id, pid, isr=[r for r in p.isr if r != broker_id]))
    return Result(tuple(out), None)


def allocate_producer_ids(image: MetadataImage, controller_id: int,
                          count: int) -> Result[tuple[int, int]]:
    """AllocateProducerIds: a block of `count` ids; response (first id, count)."""
    first = max(image.next_producer_id, 1000)
    return Result((records.producer_ids(controller_id, first + count),), (first, count))
