"""A seeded simulation: a cluster under a fault plan, producers and a churning group, checked.

    result = Simulation(seed=7).run()       # raises SimulationViolation naming seed and step
    print(result.summary(), result.digest)

Everything is drawn from one `random.Random(seed)`: the topic's partition count, the fault plan
(broker kills and restarts, controller failovers, network partitions between brokers and
between the clients and a broker where the cluster has them, KIP-253 partition expansion and
deletion in some plans), consumer group churn, and the keys produced. The cluster
(seeded too) runs on a VirtualTimeLoop, so session timeouts, ISR shrinks and retries cost no
real time. After every step the invariants of minibroker.testing.invariants are checked.

What a seed decides, and so replays exactly, is `result.trace` and its `result.digest`: the plan
(partition count, KIP-253 or not, each step's action, target, keys and window), the records
each step sends (key and per-key sequence: the values), and that every invariant held. What
stays timing-dependent is reported apart, in `result.observed` (each line stamped with virtual
time), and kept out of the digest: how many sends were acknowledged or failed by the end of
each step, what the group delivered and committed, which broker hosts the controller after a
failover, whether an expansion or deletion was answered. The clients and the cluster talk over
real loopback sockets, and the order in which the kernel reports them ready, the point at which
a virtual-time jump cuts a producer's linger or a retry, and the real time an executor thread
(a getaddrinfo) adds to the virtual clock vary from run to run, so these counts did too (23 of
200 seeds gave another digest on a second pass when they were part of it). `port`: the first
broker's port (0: any free ones), for runs that must not share ports.

Clients are the reference client's: one idempotent acks=all Producer on a topic with
replication factor 3 and min.insync.replicas 2, and a consumer group whose members join and leave.
"""
from __future__ import annotations

import asyncio
import collections
import hashlib
import random
from dataclasses import dataclass, field

import kafka.errors as Errors

from minibroker.client import Admin, Consumer, Producer, TopicPartition
from minibroker.cluster import Cluster
from minibroker.testing import invariants
from minibroker.testing.invariants import Acked
from minibroker.testing.virtual_time import RealTimeLimitExceeded, VirtualTimeLoop

TOPIC = "sim"
GROUP = "sim-group"
BROKERS = 3


# Network partitions between brokers and between clients and a broker (Cluster.partition_network,
# Cluster.isolate_clients) join the plans where the cluster has them.
_NETWORK_FAULTS = hasattr(Cluster, "partition_network") and hasattr(Cluster, "isolate_clients")


class SimulationViolation(AssertionError):
    """An invariant failed; the message names the seed and the step, to replay it."""


@dataclass(frozen=True)
class Step:
    action: str             # see Simulation.ACTIONS
    target: int = -1        # a broker id, a member index or a partition count
    keys: tuple[bytes, ...] = ()    # the records produced in this step, by key
    window_ms: int = 1000   # virtual time the step lasts after its action


@dataclass
class SimulationResult:
    seed: int
    plan: list[Step]
    trace: list[str]                # what the seed decides: the digest's input
    observed: list[str] = field(default_factory=list)     # timing-dependent, not digested
    acked: int = 0
    failed: int = 0
    delivered: int = 0
    counts: collections.Counter = field(default_factory=collections.Counter)
    virtual_seconds: float = 0.0

    @property
    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()[:16]

    def summary(self) -> str:
        c = self.counts
        return (f"seed={self.seed} steps={len(self.plan)} acked={self.acked} "
                f"failed={self.failed} delivered={self.delivered} kills={c['kill']} "
                f"failovers={c['controller_failover']} partitions={c['partition']} "
                f"client_cuts={c['isolate_clients']} "
                f"expansions={c['expand']} deletions={c['shrink']} joins={c['join']} "
                f"leaves={c['leave']} violations=0 digest={self.digest}")


def draw_plan(rng: random.Random, steps: int, partitions: int, kip253: bool) -> list[Step]:
    """The fault plan: at most one broker down or cut off at a time (RF 3, min ISR 2, so
    acks=all production goes on), 1-3 group members, 2-4 undeleted partitions."""
    keys = [b"k%d" % i for i in range(8)]
    plan: list[Step] = [Step("join", 0, (), 500)]
    down, cut, members, count = -1, False, 1, partitions
    for _ in range(steps):
        choices = ["produce"]
        if down < 0 and not cut:
            choices += ["kill", "kill", "bounce", "controller_failover", "kill_controller_host"]
            choices += [a for a in ("partition", "isolate_clients") if _NETWORK_FAULTS]
        if down >= 0:
            choices += ["restart", "restart"]
        if cut:
            choices += ["heal", "heal"]
        if members < 3:
            choices.append("join")
        if members > 1:
            choices.append("leave")
        if kip253 and count < 4:
            choices.append("expand")
        if kip253 and count > 2:
            choices.append("shrink")
        action = rng.choice(choices)
        target = -1
        if action in ("kill", "bounce"):
            target = down = rng.randint(1, BROKERS)
            down = target if action == "kill" else -1
        elif action == "kill_controller_host":
            down = 0                        # resolved when run: whichever broker hosts it
        elif action == "restart":
            target, down = down, -1
        elif action in ("partition", "isolate_clients"):
            target, cut = rng.randint(1, BROKERS), True
        elif action == "heal":
            cut = False
        elif action == "join":
            target, members = members, members + 1
        elif action == "leave":
            target, members = rng.randrange(members), members - 1
        elif action in ("expand", "shrink"):
            count += 1 if action == "expand" else -1
            target = count
        produced = tuple(rng.choice(keys) for _ in range(rng.randint(5, 30)))
        # A cut lasts long enough, some of the time, for Kafka's timeouts to act on it: the
        # follower leaves the ISR (replica.lag.time.max.ms), the broker is fenced
        # (broker.session.timeout.ms), a cut-off controller resigns.
        windows = (1000, 10000, 35000) if action == "partition" else (500, 1000, 2000, 5000)
        plan.append(Step(action, target, produced, rng.choice(windows)))
    return plan


async def _cancel_leftovers() -> None:
    """Tasks the cluster left (a stopped broker's last AlterPartition call, ...)."""
    leftover = asyncio.all_tasks() - {asyncio.current_task()}
    for task in leftover:
        task.cancel()
    await asyncio.gather(*leftover, return_exceptions=True)


class Simulation:
    ACTIONS = ("produce", "kill", "restart", "bounce", "controller_failover",
               "kill_controller_host", "partition", "isolate_clients", "heal", "join", "leave",
               "expand", "shrink")

    def __init__(self, seed: int, steps: int = 8, real_time_limit: float = 120.0,
                 port: int = 0) -> None:
        """real_time_limit: real seconds one run may take before it counts as a livelock;
        port: the cluster's first broker port (0: ephemeral ports)."""
        self.seed = seed
        self.port = port
        self.rng = random.Random(seed)
        self.partitions = self.rng.randint(2, 3)
        self.kip253 = self.rng.random() < 0.3
        self.plan = draw_plan(self.rng, steps, self.partitions, self.kip253)
        self.real_time_limit = real_time_limit
        self.trace: list[str] = []
        self.observed: list[str] = []
        self.acked: list[Acked] = []
        self.failed = 0
        self.delivered: list[tuple[bytes, int]] = []
        self.counts: collections.Counter = collections.Counter()
        self.step_index = -1
        self._down: int | None = None
        self._members: list[tuple[Consumer, asyncio.Task]] = []
        self._seqs: collections.Counter = collections.Counter()
        self._leaders = invariants.LeaderHistory()
        self._committed = invariants.CommittedOffsets()

    def run(self) -> SimulationResult:
        """Run on a fresh VirtualTimeLoop; raises SimulationViolation on a broken invariant."""
        loop = VirtualTimeLoop(real_time_limit=self.real_time_limit)
        try:
            return loop.run_until_complete(self._main())
        except RealTimeLimitExceeded as e:
            # Busy callbacks that never let the clock move: a livelock is a finding too.
            self._violated([str(e)], "virtual time stood still (a livelock)")
            raise
        finally:
            loop.run_until_complete(_cancel_leftovers())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    # ------------------------------------------------------------------ the run
    def _decided(self, line: str) -> None:
        """A line of the trace: something the seed alone decides (no time, no counts)."""
        self.trace.append(line)

    def _note(self, line: str) -> None:
        """A timing-dependent observation (module docstring): out of the digest."""
        self.observed.append(f"{asyncio.get_running_loop().time():.3f} {line}")

    def _violated(self, problems: list[str], what: str) -> None:
        if problems:
            raise SimulationViolation(
                f"seed {self.seed}, step {self.step_index} "
                f"({self.plan[self.step_index] if self.step_index >= 0 else 'setup'}): {what}: "
                + "; ".join(problems[:5]) + f" (replay: Simulation({self.seed}).run())")

    async def _main(self) -> SimulationResult:
        loop = asyncio.get_running_loop()
        start = loop.time()
        cluster = Cluster(brokers=BROKERS, seed=self.seed, group_initial_rebalance_delay_ms=0,
                          offsets_topic_num_partitions=1,   # fewer partitions to move per kill
                          port=self.port)
        await cluster.start()
        try:
            await cluster.create_topic(TOPIC, self.partitions, BROKERS,
                                       {"min.insync.replicas": "2"})
            self._decided(f"seed {self.seed} topic {TOPIC} partitions={self.partitions} "
                          f"kip253={self.kip253}")
            async with Admin(cluster.bootstrap) as admin:
                producer = Producer(cluster.bootstrap, acks="all", linger_ms=5,
                                    clock=cluster.clock, request_timeout_ms=5000,
                                    delivery_timeout_ms=60000, retry_backoff_ms=50,
                                    client_id="sim-producer")
                await producer.start()
                try:
                    for self.step_index, step in enumerate(self.plan):
                        await self._step(cluster, admin, producer, step)
                    self.step_index = len(self.plan) - 1
                    await self._restore(cluster)
                    await producer.flush(timeout=120)
                finally:
                    await producer.stop(timeout=5)
                await self._drain()
                await self._check_committed(admin)
            await self._final_checks(cluster)
            self._decided("every invariant held")
        finally:
            for c, task in self._members:
                task.cancel()
                await c.close(timeout=2)
            await cluster.stop()
        return SimulationResult(self.seed, self.plan, self.trace, self.observed, len(self.acked),
                                self.failed, len(self.delivered), self.counts,
                                loop.time() - start)

    async def _step(self, cluster: Cluster, admin: Admin, producer: Producer, step: Step) -> None:
        self._decided(f"step {self.step_index} {step.action} {step.target} "
                      f"window={step.window_ms} sends="
                      + ",".join(f"{k.decode()}:{self._seqs[k] + step.keys[:i].count(k)}"
                                 for i, k in enumerate(step.keys)))
        await self._act(cluster, admin, step)
        if step.action not in ("expand", "shrink"):     # counted by _act when they succeed
            self.counts[step.action] += 1
        for key in step.keys:
            seq = self._seqs[key]
            self._seqs[key] += 1
            value = b"%s:%d" % (key, seq)
            producer.send(TOPIC, value, key=key).add_done_callback(
                lambda f, k=key, s=seq, v=value: self._on_ack(f, k, s, v))
        await asyncio.sleep(step.window_ms / 1000)
        self._note(f"step {self.step_index} done: acked={len(self.acked)} failed={self.failed} "
                   f"delivered={len(self.delivered)} controller={cluster.controller_node_id}")
        await self._check_step(cluster, admin)

    async def _check_step(self, cluster: Cluster, admin: Admin) -> None:
        self._violated(invariants.replica_logs(cluster, TOPIC), "HWM <= LEO")
        self._violated(self._leaders.check(cluster, TOPIC), "one leader per partition and epoch")
        self._violated(invariants.acked_on_leaders(cluster, TOPIC, self.acked),
                       "acknowledged record lost")
        await self._check_committed(admin)

    async def _act(self, cluster: Cluster, admin: Admin, step: Step) -> None:
        a = step.action
        if a == "kill":
            await cluster.stop_broker(step.target)
            self._down = step.target
        elif a == "kill_controller_host":
            self._down = cluster.controller_node_id
            await cluster.stop_broker(self._down)
            self.counts["kill"] += 1
            self.counts["controller_failover"] += 1
        elif a == "restart":
            await cluster.start_broker(self._down)
            self._down = None
        elif a == "bounce":
            await cluster.restart_broker(step.target)
            self.counts["kill"] += 1
        elif a == "controller_failover":
            await cluster.stop_controller()
            await asyncio.sleep(0.1)
            await cluster.start_controller()
        elif a == "partition":
            others = [b for b in sorted(cluster.brokers) if b != step.target]
            await cluster.partition_network([step.target], others)
        elif a == "isolate_clients":
            cluster.isolate_clients(step.target)
        elif a == "heal":
            await cluster.heal_network()
            cluster.heal_clients()
        elif a == "join":
            self._join(cluster, step.target)
        elif a == "leave":
            c, task = self._members.pop(step.target)
            task.cancel()
            await c.close(timeout=5)
        elif a in ("expand", "shrink"):
            # Refused while a broker is down (3 replicas need 3 live brokers), or unanswered
            # across a network partition: traced, not a violation.
            try:
                result = (await admin.create_partitions({TOPIC: step.target},
                                                        raise_on_error=False))[TOPIC]
            except (Errors.KafkaError, ConnectionError, asyncio.TimeoutError) as e:
                result = e
            if result is None:
                self.counts[a] += 1
            a += f" {type(result).__name__}"
        self._note(f"step {self.step_index} {a} {step.target} -> "
                   f"controller={cluster.controller_node_id} down={self._down}")

    def _join(self, cluster: Cluster, index: int) -> None:
        c = Consumer(cluster.bootstrap, group_id=GROUP, client_id=f"sim-member-{index}",
                     auto_offset_reset="earliest", fetch_max_wait_ms=100,
                     session_timeout_ms=10000, heartbeat_interval_ms=1000,
                     rebalance_timeout_ms=10000, auto_commit_interval_ms=1000,
                     request_timeout_ms=5000, retry_backoff_ms=50)
        c.subscribe([TOPIC])

        async def poll_loop() -> None:
            while True:
                try:
                    records = await c.poll(0.2)
                except Errors.KafkaError:
                    await asyncio.sleep(0.1)
                    continue
                for r in records:
                    key, seq = r.value.rsplit(b":", 1)
                    self.delivered.append((key, int(seq)))
        self._members.append((c, asyncio.get_running_loop().create_task(poll_loop())))

    def _on_ack(self, fut: asyncio.Future, key: bytes, seq: int, value: bytes) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.failed += 1
            return
        md = fut.result()
        self.acked.append(Acked(key, seq, md.partition, md.offset, value))

    async def _check_committed(self, admin: Admin) -> None:
        try:
            offsets = await asyncio.wait_for(admin.list_group_offsets(GROUP), 10)
        except (Errors.KafkaError, ConnectionError, asyncio.TimeoutError) as e:
            self._note(f"committed offsets unavailable: {type(e).__name__}")
            return
        committed = {(tp.topic, tp.partition): off for tp, off in offsets.items()}
        self._note(f"committed {sorted(committed.items())}")
        self._violated(self._committed.check(committed), "committed offsets")

    # ------------------------------------------------------------------ the end
    async def _restore(self, cluster: Cluster) -> None:
        """Every broker back, the network whole, a controller elected."""
        if _NETWORK_FAULTS:
            await cluster.heal_network()
            cluster.heal_clients()
        for bid, b in sorted(cluster.brokers.items()):
            if not b.running:
                await cluster.start_broker(bid)
        if cluster.controller is None:
            await cluster.start_controller()
        self._note(f"restored: controller={cluster.controller_node_id}")

    async def _drain(self, timeout: float = 60.0) -> None:
        """Until the group delivered every acknowledged record (bounded in virtual time)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        wanted = {(a.key, a.seq) for a in self.acked}
        while loop.time() < end and not wanted <= set(self.delivered):
            await asyncio.sleep(0.5)
        self._note(f"drained: delivered {len(wanted & set(self.delivered))}/{len(wanted)}")

    async def _final_checks(self, cluster: Cluster) -> None:
        read: dict[tuple[int, int], bytes] = {}
        count = max(len(b.metadata.topics[TOPIC].partitions) for b in cluster.brokers.values())
        reader = Consumer(cluster.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                          client_id="sim-reader", ordering_barrier=False)
        reader.assign([TopicPartition(TOPIC, p) for p in range(count)])
        loop = asyncio.get_running_loop()
        end = loop.time() + 60
        try:
            wanted = {(a.partition, a.offset) for a in self.acked}
            while not wanted <= read.keys() and loop.time() < end:
                for r in await reader.poll(0.5):
                    read[(r.partition, r.offset)] = r.value
        finally:
            await reader.close()
        self._note(f"read back {len(read)} records")
        self._violated(invariants.acked_readable(self.acked, read), "acknowledged record lost")
        self._violated(invariants.per_key_order(self.acked, self.delivered), "per-key order")
