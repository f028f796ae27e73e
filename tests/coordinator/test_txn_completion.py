"""A decided transaction always completes on its coordinator (issue 42): the CompleteCommit
record is retried, as Kafka's TransactionMarkerChannelManager retries its append, when its write
times out. Before, a Complete write whose high watermark was slow (the follower fetches of
__transaction_state held back here; under load in the exactly-once conformance test) left the id
in PrepareCommit, every later request of the producer answered CONCURRENT_TRANSACTIONS until
another coordinator took over."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import KafkaStorageError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchResponse

from minibroker.client import Producer
from minibroker.cluster import Cluster
from minibroker.coordinator.txn.records import COMPLETE_COMMIT

pytestmark = pytest.mark.timeout(120)
STATE = "__transaction_state"


async def test_a_complete_write_that_times_out_is_retried_until_written():
    async with Cluster(brokers=3, replica_lag_time_max_ms=600_000,
                       transaction_state_log_num_partitions=1) as c:
        await c.create_topic("out", 1, 3)
        stall = {"on": False, "refused": 0}

        def hold_state_replication(req, ctx):
            # Follower fetches naming __transaction_state fail while the stall is on: its high
            # watermark cannot pass the coordinator's Complete record.
            if stall["on"] and req.replica_id >= 0 and \
                    any(t.topic == STATE for t in req.topics):
                stall["refused"] += 1
                return FetchResponse(throttle_time_ms=0, error_code=KafkaStorageError.errno,
                                     session_id=0, responses=[])
            return None

        def markers_sent(req, ctx):     # the Prepare record is written: stall the Complete one
            stall["on"] = True
            return None
        c.faults.control(ApiKey.Fetch, hold_state_replication)
        c.faults.control(ApiKey.WriteTxnMarkers, markers_sent)
        async with Producer(c.bootstrap, transactional_id="eos", linger_ms=1) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send("out", b"first", partition=0)
            await producer.commit_transaction()
            await asyncio.sleep(8)              # past the coordinator's 5 s write timeout
            assert stall["refused"] > 0
            stall["on"] = False
            c.faults.clear()
            coordinator = c.brokers[await c.leader_of(STATE, 0)].txn
            for _ in range(100):
                code, txn = coordinator.describe("eos")
                if txn is not None and txn.state == COMPLETE_COMMIT:
                    break
                await asyncio.sleep(0.1)
            assert txn is not None and txn.state == COMPLETE_COMMIT
            producer.begin_transaction()        # not CONCURRENT_TRANSACTIONS for good
            await producer.send("out", b"second", partition=0)
            await asyncio.wait_for(producer.commit_transaction(), 20)
