"""Network partitions on demand: who can reach whom, by broker id (Jepsen's nemesis, in process).

Every inter-broker connection (replica fetchers, the controller's LeaderAndIsr / UpdateMetadata /
StopReplica, WriteTxnMarkers and KIP-890 verification) is opened through `connect(src, dst, ...)`,
which refuses a cut link and remembers the connection: cutting a link closes the connections
across it, as a lost connection (the sender sees ConnectionClosed and retries, as it would after
a timeout). In-process calls to the controller (forwarding, AlterPartition, heartbeats) ask
`reachable(src, dst)` themselves. Clients are cut from a broker with `isolate_clients`: the broker
closes their connections and every request on a new one (inter-broker connections are told apart
by both ends' addresses: Linux gives one local port to connections to different destinations).
This module knows broker ids only, no broker.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Callable, Iterable

from minibroker.network.sasl_client import scram_authenticate
from minibroker.network import memory
from minibroker.security.principal import INTER_BROKER
from minibroker.network.client import KafkaClientConnection
from minibroker.network.tcp import Handle, KafkaServerConnection

log = logging.getLogger("minibroker.network")


class LinkDown(ConnectionError):
    """A connection refused because a network partition cuts the link."""


class NetworkPartitions:
    def __init__(self) -> None:
        self._cuts: set[tuple[int, int]] = set()       # (a, b) with a < b: no traffic either way
        self.isolated: set[int] = set()                # brokers no client can reach
        # Open inter-broker connections: connection -> (src, dst); by (local, remote) address.
        self._links: dict[KafkaClientConnection, tuple[int, int]] = {}
        self._addrs: dict[tuple[Any, ...], KafkaClientConnection] = {}
        self.generation = 0                             # bumped on every change
        # Listeners of brokers in this process: (host, port) -> memory.connect's arguments.
        self.listeners: dict[tuple[str, int], tuple[Handle, int, dict[KafkaServerConnection, None],
                                                    str]] = {}
        # Brokers of this process linked by pipes: id -> (topic, partition) -> its log or None, for
        # followers to share the bytes of batches their leader holds (log/twins.py).
        self.local_logs: dict[int, Callable[[str, int], Any]] = {}
        # (user, password) the controller authenticates with to control-plane listeners over
        # TCP (serve --processes); None: they do not authenticate.
        self.control_plane_credentials: tuple[str, str] | None = None
        # The same for the brokers' inter-broker listener, when only the cluster user may use it
        # (serve --processes with a secured client listener); None: it does not authenticate.
        self.inter_broker_credentials: tuple[str, str] | None = None

    # ------------------------------------------------------------------ state
    @property
    def partitioned(self) -> bool:
        return bool(self._cuts)

    def reachable(self, src: int, dst: int) -> bool:
        return src == dst or (min(src, dst), max(src, dst)) not in self._cuts

    def cuts(self) -> list[tuple[int, int]]:
        return sorted(self._cuts)

    def partition(self, side_a: Iterable[int], side_b: Iterable[int]) -> None:
        """No traffic between any broker of side_a and any of side_b (both ways) until heal();
        links within a side, and other partitions already in place, stay as they are."""
        a, b = sorted({int(x) for x in side_a}), sorted({int(x) for x in side_b})
        if set(a) & set(b):
            raise ValueError(f"a broker cannot be on both sides: {sorted(set(a) & set(b))}")
        new = {(min(x, y), max(x, y)) for x, y in itertools.product(a, b)}
        self._cuts |= new
        self.generation += 1
        log.info("network partition: %s | %s", a, b)
        for conn, (src, dst) in sorted(self._links.items(), key=lambda kv: kv[1]):
            if (min(src, dst), max(src, dst)) in new:
                conn.close(f"network partition between broker {src} and broker {dst}")

    def heal(self) -> None:
        """End every partition between brokers (client isolation stays: heal_clients)."""
        if self._cuts:
            log.info("network healed: %s", sorted(self._cuts))
        self._cuts.clear()
        self.generation += 1

    def isolate_clients(self, broker_id: int) -> None:
        self.isolated.add(int(broker_id))
        self.generation += 1

    def heal_clients(self, broker_id: int | None = None) -> None:
        if broker_id is None:
            self.isolated.clear()
        else:
            self.isolated.discard(int(broker_id))
        self.generation += 1

    def is_inter_broker(self, peer: Iterable[Any] | None, local: Iterable[Any] | None) -> bool:
        """Whether a server-side connection (its peer's and its own address) is the other end of
        one of our inter-broker ones."""
        if not peer or not local:
            return False
        conn = self._addrs.get((tuple(peer), tuple(local)))
        return conn is not None and not conn.closed

    # ------------------------------------------------------------------ connections
    async def connect(self, src: int, dst: int, host: str, port: int, client_id: str,
                      timeout: float = 10.0, control_plane: bool = False
                      ) -> KafkaClientConnection:
        """An inter-broker connection from broker src to broker dst (LinkDown if cut)."""
        if not self.reachable(src, dst):
            raise LinkDown(f"network partition between broker {src} and broker {dst}")
        local = self.listeners.get((host, port))
        if local is not None:
            handle, max_request_bytes, connections, name = local
            conn = memory.connect(handle, max_request_bytes=max_request_bytes,
                                  connections=connections, name=name, client_id=client_id)
            memory.server_of(conn).principal = INTER_BROKER
        else:
            conn = await KafkaClientConnection.connect(host, port, client_id=client_id,
                                                       timeout=timeout)
            creds = (self.control_plane_credentials if control_plane
                     else self.inter_broker_credentials)
            if creds is not None:
                try:
                    await scram_authenticate(conn, *creds)
                except BaseException:
                    conn.close(f"{'control-plane' if control_plane else 'inter-broker'} "
                               "authentication failed")
                    raise
        if not self.reachable(src, dst):        # cut while connecting
            conn.close(f"network partition between broker {src} and broker {dst}")
            raise LinkDown(f"network partition between broker {src} and broker {dst}")
        self._forget_closed()
        self._links[conn] = (src, dst)
        local = conn.transport.get_extra_info("sockname") if conn.transport else None
        remote = conn.transport.get_extra_info("peername") if conn.transport else None
        if local and remote:
            self._addrs[(tuple(local), tuple(remote))] = conn
        return conn

    def add_listener(self, host: str, port: int, handle: Handle, max_request_bytes: int,
                     connections: dict[KafkaServerConnection, None], name: str) -> None:
        self.listeners[(host, port)] = (handle, max_request_bytes, connections, name)

    def remove_listener(self, host: str, port: int) -> None:
        self.listeners.pop((host, port), None)

    def _forget_closed(self) -> None:
        for conn in [c for c in self._links if c.closed]:
            del self._links[conn]
        for addr in [a for a, c in self._addrs.items() if c.closed]:
            del self._addrs[addr]
