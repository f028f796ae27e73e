"""KIP-890 part 1: before a transactional batch starts a transaction in a partition, its leader asks
the transactional id's coordinator whether the partition was added to the transaction
(AddPartitionsToTxn verify_only; a local call when this broker is the coordinator). A partition
where the producer's transaction is already open needs no question. Without this, a hanging
transaction (a late batch after its abort) could hold the last stable offset back for ever.

Answers for the Produce response, as Kafka maps them: not in the transaction -> INVALID_TXN_STATE;
fenced -> INVALID_PRODUCER_EPOCH; the coordinator unreachable or busy -> NOT_ENOUGH_REPLICAS
(retriable for producers)."""
from __future__ import annotations

import logging
import struct
from collections.abc import Sequence

import kafka.errors as Errors

from minibroker.broker.context import Services
from minibroker.log.batch import TRANSACTIONAL_MASK
from minibroker.protocol.fast import ProduceTopic

log = logging.getLogger("minibroker.txn")

_ATTRS = struct.Struct(">h")
_PID_EPOCH = struct.Struct(">qh")
_FENCED = (Errors.ProducerFencedError.errno, Errors.InvalidProducerEpochError.errno,
           Errors.InvalidProducerIdMappingError.errno)


async def verify_transactional(services: Services, transactional_id: str,
                               topics: Sequence[ProduceTopic]) -> dict[tuple[str, int], int]:
    """{(topic, partition): error} of the partitions whose batch must not be appended."""
    errors: dict[tuple[str, int], int] = {}
    need: dict[tuple[int, int], list[tuple[str, int]]] = {}
    rm = services.replica_manager
    for td in topics:
        for pd in td.partitions:
            records = pd.records
            if records is None or len(records) < 61:
                continue                                # the append answers it
            tp = (td.name, pd.index)
            if not _ATTRS.unpack_from(records, 21)[0] & TRANSACTIONAL_MASK:
                errors[tp] = Errors.InvalidRecordError.errno
                continue
            pid, epoch = _PID_EPOCH.unpack_from(records, 43)
            if rm.in_ongoing_txn(td.name, pd.index, pid):
                continue
            need.setdefault((pid, epoch), []).append(tp)
    for (pid, epoch), tps in sorted(need.items()):
        code, node = services.txn.coordinator_for(transactional_id)
        try:
            if code:
                got = {tp: code for tp in tps}
            elif node == services.node_id:
                got = await services.txn.add_partitions(transactional_id, pid, epoch, tps,
                                                      verify_only=True)
            else:
                got = await services.txn_verifier.verify(node, transactional_id, pid, epoch, tps)
        except Exception as e:  # noqa: BLE001 — the coordinator is down: the producer retries
            log.debug("broker %d: verifying %r failed: %r", services.node_id, transactional_id, e)
            got = {tp: Errors.NotEnoughReplicasError.errno for tp in tps}
        for tp in tps:
            c = got.get(tp, Errors.InvalidTxnStateError.errno)
            if c == 0:
                continue
            if c in _FENCED:
                c = Errors.InvalidProducerEpochError.errno
            elif c != Errors.InvalidTxnStateError.errno:
                c = Errors.NotEnoughReplicasError.errno
            errors[tp] = c
    return errors
