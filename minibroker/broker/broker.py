"""One broker: a listener, a metadata cache, a replica manager, a group coordinator and a
transaction coordinator.

A broker learns cluster state only from the controller's LeaderAndIsr / UpdateMetadata /
StopReplica requests; it reaches the controller through `controller_channel` (admin forwarding,
AlterPartition, producer id blocks), which the cluster points at whichever controller is active.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Iterable
from typing import Any

import minibroker.broker.handlers  # noqa: F401 — registers every handler with dispatch
from minibroker.broker.controller_quota import ControllerMutationQuota
from minibroker.broker import releases
from minibroker.broker.dispatch import HANDLERS, handler_for
from minibroker.broker.faults import Faults
from minibroker.broker.coordinator_log import ReplicaManagerPartitionWriter
from minibroker.broker.fetch_session import FetchSessionCache
from minibroker.metadata.cache import MetadataCache
from minibroker.broker.replica_manager import ReplicaManager
from minibroker.broker.context import ControllerChannel, FaultAdmin, PendingMetadata, Services
from minibroker.broker.stats import BrokerStats
from minibroker.broker.txn_channel import TxnChannel
from minibroker.broker.throttle import ReplicationThrottle
from minibroker.clock import Clock
from minibroker.config import ClusterConfig
from minibroker.coordinator.offsets import OFFSETS_TOPIC
from minibroker.coordinator.runtime import GroupCoordinatorRuntime
from minibroker.coordinator.txn.coordinator import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from minibroker.ids import IdSource
from minibroker.log.config import broker_defaults
from minibroker.log.partition_log import PartitionLog
from minibroker.network.accept import Listener
from minibroker.network.request_pool import RequestMemoryPool
from minibroker.network.tcp import close_idle_connections, start_listener
from minibroker.security.authorizer import StandardAuthorizer, authorizer_from_config
from minibroker.security.principal import ANONYMOUS
from minibroker.security.credentials import CredentialStore
from minibroker.security.listeners import (
    PROTOCOL_IDS, Listener as ListenerConfig, advertised, broker_listeners, primary)
from minibroker.broker.listener_security import (
    CONTROL_PLANE_USER, cluster_listener, control_plane_handle, inter_broker_handle,
    listener_security)

log = logging.getLogger("minibroker.broker")


def _authorizer(config: ClusterConfig) -> StandardAuthorizer | None:
    """authorizer.class.name's authorizer, or None; the controller of serve --processes (its
    control-plane user) is a super user."""
    super_users = config.super_users
    if config.minibroker_control_plane_password:
        super_users = ";".join(filter(None, (super_users, f"User:{CONTROL_PLANE_USER}")))
    return authorizer_from_config(config.authorizer_class_name, super_users,
                                  config.allow_everyone_if_no_acl_found)


class Broker:
    def __init__(self, node_id: int, config: ClusterConfig, clock: Clock, ids: IdSource,
                 controller_channel: ControllerChannel, faults: Faults, port: int = 0,
                 rack: str | None = None, credentials: CredentialStore | None = None,
                 listener_ports: dict[str, int] | None = None) -> None:
        """listener_ports: {name: port} for listeners on port 0 (a restarted broker process's)."""
        self.node_id = node_id
        self.config = config
        self.clock = clock
        self.ids = ids
        self.controller = controller_channel
        self.faults = faults
        self.host = config.host
        self.port = port
        self.rack = rack
        self.metadata = MetadataCache()
        self.stats = BrokerStats()
        self.pending_metadata = PendingMetadata()       # UpdateMetadata's own state (k06)
        self.controller_mutation_quota = ControllerMutationQuota(
            config.controller_mutation_rate, config.controller_quota_window_num,
            config.controller_quota_window_size_seconds)
        # Dynamic broker configs, {broker id or "" (cluster default): {name: value}}, as the
        # controller's UpdateMetadata last said; the throttle rates among them drive `throttle`.
        self.dynamic_configs: dict[str, dict[str, str]] = {}
        self.throttle = ReplicationThrottle(node_id, clock.monotonic)
        # KIP-11: None (everything allowed) unless authorizer.class.name is set; its ACLs are
        # what the controller's last UpdateMetadata carried.
        self.authorizer = _authorizer(config)
        # Topic configs not set on a topic default to the broker's log.* configs (Kafka's synonyms).
        self.log_defaults = broker_defaults(config.describe())
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots,
                                                ids.rng)
        # serve --data-dir: this broker's logs (and metadata log copy) live under here.
        self.data_dir = (None if config.data_dir is None
                         else os.path.join(config.data_dir, f"broker-{node_id}"))
        self.replica_manager = ReplicaManager(node_id, config, clock, self.metadata,
                                              controller_channel, self.log_defaults,
                                              stats=self.stats, throttle=self.throttle,
                                              network=faults.network, data_dir=self.data_dir)
        # Transactions (KIP-98): markers and KIP-890 verification go to other brokers over the wire.
        self.txn_channel = TxnChannel(node_id, self.metadata, faults.network)
        self.groups, self.txn = self._coordinators()
        self.connections: dict[Any, None] = {}  # an ordered set: closed in the order they came
        # The APIs this broker serves and advertises: every registered one, or those of the Kafka
        # release it emulates (serve --kafka-version), narrowed to that release's versions.
        self.handlers = (HANDLERS if config.kafka_version is None
                         else releases.dispatch_table(config.kafka_version))
        # KIP-848's consumer groups (keys 68/69): on by default from Kafka 4.0 only.
        self.consumer_group_protocol = releases.consumer_group_protocol(config.kafka_version)
        # Its own copy: SCRAM credentials then follow what UpdateMetadata told this broker.
        self.credentials = credentials.copy() if credentials is not None else CredentialStore()
        self.services = self._services()
        # What a listener calls per request frame: network/ knows no broker, only this.
        self.handle = handler_for(self.services)
        # The control-plane listener (KIP-291's control.plane.listener.name): the controller's
        # LeaderAndIsr, StopReplica and UpdateMetadata arrive here only; Metadata never lists it.
        self.control_handle = handler_for(self.services, control_plane=True)
        self.control_port = 0
        # A control-plane TCP listener only when the controller and other brokers come over
        # sockets (inter-broker sockets, or a broker process of serve --processes); in one
        # process they use in-memory pipes and no port exists for anyone else to find.
        self.control_plane_sockets = config.minibroker_inter_broker_sockets
        # Kafka's listeners (security/listeners.py): one server each; the inter-broker one's
        # address is this broker's registered one (self.port).
        self.listeners = self._listener_specs(port, listener_ports or {})
        self.inter_broker_listener = primary(config, self.listeners).name
        # serve --processes' own listener, if any: only the cluster user passes it; not for clients.
        self.cluster_listener = cluster_listener(config, primary(config, self.listeners))
        self._servers: list[Listener] = []
        queued = self.config.queued_max_request_bytes
        self.request_pool = RequestMemoryPool(queued) if queued > 0 else None
        self._server: Listener | None = None
        self._control_server: Listener | None = None
        self._idle_reaper: asyncio.Task[None] | None = None
        self.running = False
        # The cluster's FaultControl runner (fault_admin.FaultAdmin), set by `serve --faults`.
        self.fault_admin: FaultAdmin | None = None
        # Bumped on each start, sent in registration so the controller can fence stale ones.
        self.broker_epoch = -1
        self._producer_ids: list[int] = []

    def _listener_specs(self, port: int, ports: dict[str, int]) -> list[ListenerConfig]:
        """`listeners` for this broker (none configured: one PLAINTEXT listener on the port the
        cluster gave), a port left to the system taken from `ports` when it names one."""
        specs = (broker_listeners(self.config, self.node_id) if self.config.listeners
                 else [ListenerConfig("PLAINTEXT", "PLAINTEXT", self.host, port)])
        return [dataclasses.replace(s, port=s.port or ports.get(s.name, 0)) for s in specs]

    def _coordinators(self) -> tuple[GroupCoordinatorRuntime, TransactionCoordinator]:
        """The group and transaction coordinators, each writing its internal topic through the
        replica manager and creating it through the controller on first use."""
        def create_topics(specs: list[Any]) -> Any:
            return self.controller.create_topics(specs, validate_only=False)
        groups = GroupCoordinatorRuntime(
            self.node_id, self.config, self.clock, self.ids, self.metadata,
            ReplicaManagerPartitionWriter(self.replica_manager, OFFSETS_TOPIC), create_topics)
        txn = TransactionCoordinator(
            self.node_id, self.config, self.clock, self.metadata,
            ReplicaManagerPartitionWriter(self.replica_manager, TRANSACTION_STATE_TOPIC),
            create_topics, self.next_producer_id, self.txn_channel.send_markers)
        return groups, txn

    def _services(self) -> Services:
        """What handlers may use, each service behind its Protocol: built once, shared by every
        request (broker/context.py)."""
        return Services(
            node=self, node_id=self.node_id, config=self.config, clock=self.clock,
            metadata=self.metadata, replica_manager=self.replica_manager, groups=self.groups,
            txn=self.txn, txn_verifier=self.txn_channel, controller=self.controller,
            quota=self.controller_mutation_quota, faults=self.faults, stats=self.stats,
            fetch_sessions=self.fetch_sessions, log_defaults=self.log_defaults,
            pending_metadata=self.pending_metadata, handlers=self.handlers,
            consumer_group_protocol=self.consumer_group_protocol, authorizer=self.authorizer,
            transaction_verification=releases.transaction_verification(self.config.kafka_version),
            credentials=self.credentials)

    async def start(self, listen: bool = True) -> None:
        """listen=False: no socket; requests come through network/memory.py's connect(self.handle)."""
        if listen:
            await self._start_listeners()
            # Built in every process: it also gives this process's controller the credentials
            # other processes' control planes ask for (serve --processes).
            control = control_plane_handle(self.control_handle, self.config, self.clock,
                                           self.faults.network)
            if self.control_plane_sockets:
                self._control_server = await start_listener(
                    control, self.host, self.control_port, connections=self.connections,
                    max_request_bytes=self.config.socket_request_max_bytes,
                    name=f"broker {self.node_id} control plane")
                self.control_port = self._control_server.sockets[0].getsockname()[1]
            if not self.config.minibroker_inter_broker_sockets:
                self._listen_in_memory()
            if self.config.connections_max_idle_ms > 0:
                self._idle_reaper = asyncio.get_running_loop().create_task(
                    close_idle_connections(self.connections, self.config.connections_max_idle_ms))
        self.running = True
        self.replica_manager.start()
        self.groups.start()
        self.txn.start()
        if listen:
            log.info("broker %d listening on %s", self.node_id,
                     ", ".join(str(listener) for listener in self.listeners))
            if self.authorizer is not None and self.control_plane_sockets and \
                    self.cluster_listener is None and \
                    str(ANONYMOUS) not in self.authorizer.super_users:
                # Over PLAINTEXT sockets the brokers and the controller are User:ANONYMOUS
                log.warning("broker %d: the authorizer is on and brokers reach each other over "
                            "sockets as %s, which is not in super.users: replication and the "
                            "controller's requests need CLUSTER_ACTION (docs/acls.md)",
                            self.node_id, ANONYMOUS)

    async def _start_listeners(self) -> None:
        """One server per listener; a SASL listener authenticates before dispatch
        (network/sasl.py), a TLS one wraps it in TLS (network/tls.py)."""
        bound = []
        for spec in self.listeners:
            if spec.name == self.cluster_listener:
                handle, ctx, principal_of = inter_broker_handle(
                    self.handle, self.config, self.clock, self.faults.network), None, None
            else:
                handle, ctx, principal_of = listener_security(
                    spec, self.handle, self.config, self.credentials, self.clock)
            server = await start_listener(
                handle, spec.host, spec.port, connections=self.connections,
                max_request_bytes=self.config.socket_request_max_bytes,
                name=f"broker {self.node_id} {spec.name}",
                max_connections=self.config.max_connections,
                max_connections_per_ip=self.config.max_connections_per_ip,
                pool=self.request_pool, listener=spec.name, ssl=ctx, principal_of=principal_of)
            self._servers.append(server)
            bound.append(dataclasses.replace(spec, port=server.sockets[0].getsockname()[1]))
        self.listeners = bound
        self.port = primary(self.config, bound).port
        self._server = self._servers[0]

    def listener_configs(self) -> tuple[str, str]:
        """(listeners, advertised.listeners) as Kafka writes them, with the bound ports."""
        return (",".join(str(x) for x in self.listeners),
                ",".join(str(x) for x in self.advertised_listeners()))

    def registration_listeners(self) -> tuple[tuple[str, str, int, int], ...]:
        """RegisterBrokerRecord's endpoints: (name, host, port, security protocol id)."""
        return tuple((a.name, a.host, a.port, PROTOCOL_IDS[a.security_protocol])
                     for a in self.advertised_listeners())

    def advertised_listeners(self) -> list[ListenerConfig]:
        """Metadata's addresses for this broker, one per listener, inter-broker first."""
        listeners = advertised(self.config, self.node_id, self.listeners)
        return sorted(listeners, key=lambda l: l.name != self.inter_broker_listener)

    def client_endpoints(self) -> dict[str, str]:
        """{listener name: advertised host:port} of the listeners clients use (all but the
        cluster listener), the inter-broker one first if it is among them."""
        return {a.name: f"{a.host}:{a.port}" for a in self.advertised_listeners()
                if a.name != self.cluster_listener}

    def _listen_in_memory(self) -> None:
        """Other brokers and the controller in this process reach our listeners through memory
        pipes (NetworkPartitions.connect): the same frames and handlers, no socket."""
        net, max_bytes = self.faults.network, self.config.socket_request_max_bytes
        if self._control_server is None:
            # No control port: the pipes to the client port (only in-process brokers and the
            # controller open them) are the control plane too.
            net.add_listener(self.host, self.port, self.control_handle, max_bytes,
                             self.connections, f"broker {self.node_id} (in-process peers)")
        else:
            net.add_listener(self.host, self.port, self.handle, max_bytes, self.connections,
                             f"broker {self.node_id}")
            net.add_listener(self.host, self.control_port, self.control_handle, max_bytes,
                             self.connections, f"broker {self.node_id} control plane")
        net.local_logs[self.node_id] = self._log_of

    def _log_of(self, topic: str, partition: int) -> PartitionLog | None:
        p = self.replica_manager.get(topic, partition)
        return p.log if p is not None else None

    async def stop(self) -> None:
        """Stop serving: the in-memory logs stay, like a disk across a process restart."""
        self.running = False
        if self._idle_reaper is not None:
            self._idle_reaper.cancel()
            self._idle_reaper = None
        self.faults.network.remove_listener(self.host, self.port)
        if self.control_port:
            self.faults.network.remove_listener(self.host, self.control_port)
        self.faults.network.local_logs.pop(self.node_id, None)
        for server in self._servers:
            server.close()
        if self._control_server is not None:
            self._control_server.close()
        for conn in list(self.connections):
            conn.close("broker stopping", logging.DEBUG)
        await self.replica_manager.stop()
        await self.groups.stop()
        await self.txn.stop()
        self.txn_channel.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []
        self._server = None
        if self._control_server is not None:
            await self._control_server.wait_closed()
            self._control_server = None
        log.info("broker %d stopped", self.node_id)

    def close_client_connections(self, reason: str) -> int:
        """Close every connection of a client (not the control plane's, not another broker's):
        Cluster.isolate_clients. Returns how many."""
        network = self.faults.network
        conns = [c for c in self.connections if c.handle is not self.control_handle
                 and not network.is_inter_broker(c.peer, c.local)]
        for c in conns:
            c.close(reason, logging.INFO)
        return len(conns)

    def apply_dynamic_configs(self, entries: Iterable[Any]) -> None:
        """UpdateMetadata's BrokerConfigs: this broker's own values over the cluster default."""
        by_resource: dict[str, dict[str, str]] = {}
        for e in entries:
            by_resource.setdefault(e.resource_name, {})[e.name] = e.value
        self.dynamic_configs = by_resource
        self.throttle.configure({**by_resource.get("", {}),
                                 **by_resource.get(str(self.node_id), {})})

    async def next_producer_id(self) -> int:
        """From a block of ids the controller allocated to this broker (ProducerIdsRecord)."""
        if not self._producer_ids:
            first, count = await self.controller.allocate_producer_ids(1000)
            self._producer_ids = list(range(first + count - 1, first - 1, -1))
        return self._producer_ids.pop()

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"
