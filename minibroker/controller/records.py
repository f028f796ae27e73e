"""Builders for every metadata record the controller writes — the one place they are made.

Operations decide what changes; these functions only spell the records, so a field added to a
schema is filled in one place and tests can build the exact records an operation must return.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, AbstractSet, Iterable

from minibroker.controller.delta import NO_LEADER_CHANGE
from minibroker.controller.image import CONTROL_PLANE_LISTENER
from minibroker.protocol import records as R
from minibroker.security.acl import AclBinding

if TYPE_CHECKING:
    from minibroker.security.credentials import ScramCredential

TOPIC = 2                                   # ConfigRecord.resource_type (Kafka's ConfigResource)
BROKER = 4
GROUP = 32

Epochs = Iterable[tuple[int, int]]          # (partition, leader epoch) pairs (KIP-253)
Listeners = tuple[tuple[str, str, int, int], ...]   # (name, host, port, security protocol id)


# ---------------------------------------------------------------------- brokers
def register_broker(broker_id: int, broker_epoch: int, host: str, port: int,
                    rack: str | None, control_port: int = -1,
                    listeners: Listeners = ()) -> R.RegisterBrokerRecord:
    """The inter-broker listener first (host:port), the other listeners (name, host, port,
    security protocol id) next, the control-plane listener (KIP-291), if any, last."""
    ep = R.RegisterBrokerRecord.BrokerEndpoint
    end_points = [ep(name=name, host=h, port=p, security_protocol=proto)
                  for name, h, p, proto in listeners] or [
        ep(name="PLAINTEXT", host=host, port=port, security_protocol=0)]
    if control_port > 0:
        end_points.append(ep(name=CONTROL_PLANE_LISTENER, host=host, port=control_port,
                             security_protocol=0))
    return R.RegisterBrokerRecord(broker_id=broker_id, broker_epoch=broker_epoch, rack=rack,
                                  fenced=True, end_points=end_points)


def user_scram_credential(name: str, mechanism: int, c: ScramCredential
                          ) -> R.UserScramCredentialRecord:
    return R.UserScramCredentialRecord(name=name, mechanism=mechanism, salt=c.salt,
                                       stored_key=c.stored_key, server_key=c.server_key,
                                       iterations=c.iterations)


def remove_user_scram_credential(name: str, mechanism: int) -> R.RemoveUserScramCredentialRecord:
    return R.RemoveUserScramCredentialRecord(name=name, mechanism=mechanism)


def unfence_broker(broker_id: int, broker_epoch: int) -> R.UnfenceBrokerRecord:
    return R.UnfenceBrokerRecord(id=broker_id, epoch=broker_epoch)


def fence_broker(broker_id: int, broker_epoch: int) -> R.FenceBrokerRecord:
    return R.FenceBrokerRecord(id=broker_id, epoch=broker_epoch)


def producer_ids(broker_id: int, next_producer_id: int) -> R.ProducerIdsRecord:
    return R.ProducerIdsRecord(broker_id=broker_id, broker_epoch=0,
                               next_producer_id=next_producer_id)


# ---------------------------------------------------------------------- topics
def topic(name: str, topic_id: uuid.UUID) -> R.TopicRecord:
    return R.TopicRecord(name=name, topic_id=topic_id)


def remove_topic(topic_id: uuid.UUID) -> R.RemoveTopicRecord:
    return R.RemoveTopicRecord(topic_id=topic_id)


def topic_config(topic_name: str, name: str, value: str | None) -> R.ConfigRecord:
    """value None deletes the override."""
    return R.ConfigRecord(resource_type=TOPIC, resource_name=topic_name, name=name, value=value)


def broker_config(resource_name: str, name: str, value: str | None) -> R.ConfigRecord:
    """A dynamic broker config (KIP-226) of broker `resource_name`, or "" for the cluster
    default; value None deletes it."""
    return R.ConfigRecord(resource_type=BROKER, resource_name=resource_name, name=name,
                          value=value)


def group_config(group_id: str, name: str, value: str | None) -> R.ConfigRecord:
    """A group config (KIP-848) of group `group_id`; value None deletes it."""
    return R.ConfigRecord(resource_type=GROUP, resource_name=group_id, name=name, value=value)


def acl_entry(acl_id: uuid.UUID, a: AclBinding) -> R.AccessControlEntryRecord:
    """An ACL (KIP-11 CreateAcls), under the id it is deleted by."""
    return R.AccessControlEntryRecord(
        id=acl_id, resource_type=int(a.resource_type), resource_name=a.resource_name,
        pattern_type=int(a.pattern_type), principal=a.principal, host=a.host,
        operation=int(a.operation), permission_type=int(a.permission_type))


def remove_acl_entry(acl_id: uuid.UUID) -> R.RemoveAccessControlEntryRecord:
    return R.RemoveAccessControlEntryRecord(id=acl_id)


def partition_count(topic_id: uuid.UUID, initial: int, undeleted: int,
                    pending: Epochs = ()) -> R.TopicPartitionCountRecord:
    """KIP-253: pending = the pre-bump leader epochs an unfinished expansion's partitions get."""
    entry = R.TopicPartitionCountRecord.PendingLeaderEpoch
    return R.TopicPartitionCountRecord(
        topic_id=topic_id, initial_partition_count=initial, undeleted_partition_count=undeleted,
        pending_leader_epoch_after_creation=[entry(partition_index=p, leader_epoch=e)
                                             for p, e in pending] or None)


# ---------------------------------------------------------------------- partitions
def partitions(topic_id: uuid.UUID, parts: dict[int, tuple[int, ...]], alive: AbstractSet[int],
               after_creation: Epochs = (), removed_leader_epochs: Epochs = ()
               ) -> list[R.PartitionRecord]:
    """PartitionRecords for new partitions: the first live replica leads, live replicas form
    the ISR. An index removed before (KIP-253) starts one leader epoch above its last
    incarnation's."""
    first_epoch = {p: e + 1 for p, e in removed_leader_epochs}
    entry = R.PartitionRecord.PartitionLeaderEpochAfterCreation
    after = [(k, v) for k, v in after_creation]
    out: list[R.PartitionRecord] = []
    for p, reps in sorted(parts.items()):
        isr = [r for r in reps if r in alive] or list(reps)
        leader = next((r for r in reps if r in alive), -1)
        out.append(R.PartitionRecord(
            partition_id=p, topic_id=topic_id, replicas=list(reps), isr=isr,
            removing_replicas=[], adding_replicas=[], leader=leader,
            leader_epoch=first_epoch.get(p, 0), partition_epoch=0,
            leader_epoch_after_creation=[entry(partition_index=k, leader_epoch=v)
                                         for k, v in after]))
    return out


def partition_change(topic_id: uuid.UUID, partition_id: int, leader: int = NO_LEADER_CHANGE,
                     isr: Iterable[int] | None = None, replicas: Iterable[int] | None = None,
                     leader_epoch: int = -1, before_deletion: Epochs | None = None,
                     adding: Iterable[int] | None = None, removing: Iterable[int] | None = None
                     ) -> R.PartitionChangeRecord:
    """A PartitionChangeRecord; None leaves a field as it is. leader_epoch >= 0 sets it
    explicitly (KIP-253 bumps); otherwise a leader change bumps it on replay."""
    entry = R.PartitionChangeRecord.PartitionLeaderEpochBeforeDeletion
    return R.PartitionChangeRecord(
        topic_id=topic_id, partition_id=partition_id, leader=leader,
        isr=None if isr is None else list(isr),
        replicas=None if replicas is None else list(replicas), leader_epoch=leader_epoch,
        adding_replicas=None if adding is None else list(adding),
        removing_replicas=None if removing is None else list(removing),
        leader_epoch_before_deletion=None if before_deletion is None else [
            entry(partition_index=k, leader_epoch=v) for k, v in before_deletion])


def remove_partition(topic_id: uuid.UUID, partition_id: int) -> R.RemovePartitionRecord:
    return R.RemovePartitionRecord(topic_id=topic_id, partition_id=partition_id)


# ---------------------------------------------------------------------- reassignment (KIP-179)
def partition_reassignment(timestamp_ms: int, expired_request_ids: list[int],
                           moves: Iterable[tuple[uuid.UUID, int, tuple[int, ...], tuple[int, ...]]]
                           ) -> R.PartitionReassignmentRecord:
    """moves: (topic id, partition, target replicas, replicas when accepted)."""
    entry = R.PartitionReassignmentRecord.ReassignedPartition
    return R.PartitionReassignmentRecord(
        timestamp_ms=timestamp_ms, expired_request_ids=list(expired_request_ids),
        partitions=[entry(topic_id=t, partition_id=p, replicas=list(target),
                          original_replicas=list(original)) for t, p, target, original in moves])
