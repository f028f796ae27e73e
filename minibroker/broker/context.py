"""RequestContext: what one request's handler is given, and the broker's services it may use.

The request (header, api version, the frame while the handler holds it), the connection it came
on with the connection's principal and listener (what the authorizer decides on), and the
broker's services, each behind a small Protocol naming only what handlers (and dispatch) use,
gathered in one `Services` object built once per broker: dispatch builds one small RequestContext
per request whatever the number of services.

A handler's module then shows what it touches (`ctx.replica_manager.list_offset(...)`), a reader
following a request reaches the method's contract here, and a handler cannot reach the log, the
controller image or another broker's internals through a whole `Broker`. The concrete classes
(ReplicaManager, GroupCoordinatorRuntime, TransactionCoordinator, cluster.py's and processes.py's
controller channels, ...) satisfy these Protocols structurally; tests check that they do.

This module imports no broker implementation: it sits below them, beside the value types the
services speak in (the metadata cache, configs, the clock, the coordinators' own objects).
"""
from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from minibroker.security.principal import ANONYMOUS, KafkaPrincipal
from minibroker.security.credentials import CredentialStore

if TYPE_CHECKING:
    from minibroker.clock import Clock
    from minibroker.config import ClusterConfig
    from minibroker.controller.quorum import QuorumInfo
    from minibroker.coordinator.group.classic_coordinator import ClassicGroupCoordinator
    from minibroker.coordinator.group.consumer_coordinator import ConsumerGroupCoordinator
    from minibroker.coordinator.offset_manager import OffsetMetadataManager
    from minibroker.coordinator.positions import ConsumerGroupPositions
    from minibroker.coordinator.shard import Shard
    from minibroker.coordinator.txn.state import TxnMetadata
    from minibroker.log.config import LogConfig
    from minibroker.log.memory import LogMemory
    from minibroker.log.producer_state import ProducerStateEntry
    from minibroker.metadata.cache import MetadataCache
    from minibroker.protocol.framing import RequestHeader
    from minibroker.protocol.messages import FaultControlResponse
    from minibroker.protocol.fast import ProduceTopic
    from minibroker.protocol.produce_response import PartitionResult
    from minibroker.security.acl import AclBinding, AclBindingFilter, AclOperation, ResourceType
    from minibroker.security.authorizer import StandardAuthorizer


class ItemResult(Protocol):
    """One topic's answer from the controller (its controller/result.py ItemResult)."""

    @property
    def error_code(self) -> int: ...

    @property
    def message(self) -> str | None: ...

    @property
    def topic_id(self) -> uuid.UUID | None: ...

    @property
    def partitions(self) -> int: ...

    @property
    def replication_factor(self) -> int: ...


class ReplicaManagerService(Protocol):
    """The partitions this broker hosts (broker/replica_manager.py): the one way to their logs."""

    @property
    def log_memory(self) -> LogMemory: ...

    def append_records(self, topics: Sequence[ProduceTopic], acks: int,
                       internal_topics_allowed: bool = False
                       ) -> tuple[dict[str, list[PartitionResult]], list[Any]]: ...

    async def await_replication(self, waits: list[Any], timeout_ms: int) -> None: ...

    async def fetch_records(self, items: Any, replica_id: int, max_wait_ms: int, min_bytes: int,
                            max_bytes: int, isolation_level: int, incremental: bool = False,
                            session: Any = None) -> dict[str, list[Any]]: ...

    def list_offset(self, topic: str, partition: int, current_leader_epoch: int, timestamp: int,
                    isolation_level: int, replica_id: int) -> tuple[int, int, int, int]: ...

    def end_offset_for_epoch(self, topic: str, partition: int, current_leader_epoch: int,
                             leader_epoch: int, any_replica: bool) -> tuple[int, int, int]: ...

    def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, int]: ...

    def write_txn_marker(self, topic: str, partition: int, commit: bool, producer_id: int,
                         producer_epoch: int, coordinator_epoch: int, now_ms: int
                         ) -> asyncio.Future[int] | int: ...

    def in_ongoing_txn(self, topic: str, partition: int, producer_id: int) -> bool: ...

    def describe_producers(self, topic: str, partition: int
                           ) -> tuple[int, list[ProducerStateEntry]]: ...

    def log_sizes(self, wanted: Iterable[tuple[str, int]] | None
                  ) -> list[tuple[str, int, int]]: ...

    def check_controller_epoch(self, controller_epoch: int) -> int: ...

    def apply_partition_state(self, topic: str, topic_id: uuid.UUID, partition: int, leader: int,
                              leader_epoch: int, partition_epoch: int, isr: Sequence[int],
                              replicas: Sequence[int], undeleted_partition_count: int,
                              configs: dict[str, str], after_creation: Iterable[Any] = (),
                              before_deletion: Iterable[Any] = ()) -> int: ...

    def stop_replica(self, topic: str, partition: int, delete: bool) -> int: ...

    def on_metadata_update(self, topics: Iterable[str]) -> None: ...


class GroupCoordinatorService(Protocol):
    """Consumer groups and their offsets (coordinator/runtime.py): both protocols, KIP-253's
    positions, and which broker coordinates a group."""
    classic: ClassicGroupCoordinator
    offsets: OffsetMetadataManager
    consumer: ConsumerGroupCoordinator
    positions: ConsumerGroupPositions

    def coordinator_for(self, key: str) -> tuple[int, int]: ...

    def partition_for(self, key: str) -> int: ...

    def shard_for(self, key: str) -> tuple[Shard | None, int]: ...

    def on_txn_marker(self, topic: str, partition: int, producer_id: int, commit: bool
                      ) -> None: ...

    def on_leadership_change(self) -> None: ...


class TransactionCoordinatorService(Protocol):
    """Transactional ids (coordinator/txn/coordinator.py, KIP-98)."""

    def coordinator_for(self, key: str) -> tuple[int, int]: ...

    async def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1, fenced_code: int = 0
                               ) -> tuple[int, int, int]: ...

    async def add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]], fenced_code: int = 0,
                             verify_only: bool = False) -> dict[tuple[str, int], int]: ...

    async def end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool,
                      fenced_code: int = 0) -> int: ...

    def describe(self, tid: str) -> tuple[int, TxnMetadata | None]: ...

    def list_transactions(self) -> list[TxnMetadata]: ...

    def on_leadership_change(self) -> None: ...


class TxnVerifier(Protocol):
    """KIP-890: ask another broker, the transactional id's coordinator (broker/txn_channel.py)."""

    async def verify(self, broker_id: int, transactional_id: str, producer_id: int, epoch: int,
                     tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]: ...


class ControllerChannel(Protocol):
    """How a broker reaches the active controller (Kafka's forwarding and AlterPartition RPCs).

    In one process: cluster.ControllerChannel; a `serve --processes` broker: processes'
    RemoteControllerChannel, each call to the broker process the quorum elected. tests/test_controller_channel.py
    checks both against this Protocol, method by method."""

    def auto_create_topics(self, names: list[str]) -> asyncio.Task[None]: ...

    async def alter_partition(self, broker_id: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                              ) -> int: ...

    async def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]: ...

    async def create_topics(self, specs: list[Any], validate_only: bool) -> list[ItemResult]: ...

    async def delete_topics(self, names: list[str]) -> list[ItemResult]: ...

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> ItemResult: ...

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None], replace: bool,
                                  validate_only: bool) -> ItemResult: ...

    async def alter_broker_configs(self, resource_name: str, changes: dict[str, str | None],
                                   validate_only: bool, replace: bool = False) -> ItemResult: ...

    async def alter_group_configs(self, group_id: str, changes: dict[str, str | None],
                                  validate_only: bool, replace: bool = False) -> ItemResult: ...

    async def describe_group_configs(self, group_id: str) -> dict[str, str]: ...

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                            ) -> Any: ...

    async def assign_partitions(self, assignments: list[tuple[str, int, list[int]]]) -> Any: ...

    async def alter_partition_reassignments(self, items: list[Any], allow_rf_change: bool
                                            ) -> list[Any]: ...

    async def list_partition_reassignments(self, wanted: dict[str, list[int]] | None
                                           ) -> list[Any]: ...

    async def partition_assignment_status(self, request_id: int) -> Any: ...

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[int, str | None]]: ...

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[Any]: ...

    async def alter_user_scram_credentials(self, deletions: list[tuple[str, int]],
                                           upsertions: list[Any]) -> list[Any]: ...

    async def describe_quorum(self) -> QuorumInfo: ...


class MutationQuota(Protocol):
    """KIP-599's controller mutation quota (broker/controller_quota.py)."""

    def limited(self, client_id: str) -> bool: ...

    def try_record(self, client_id: str, mutations: int, now_ms: int, strict: bool) -> int: ...

    def refund(self, client_id: str, mutations: int) -> None: ...

    def response_throttle_ms(self, client_id: str, now_ms: int, strict: bool,
                             refused_ms: int) -> int: ...


class FaultHooks(Protocol):
    """The one interception point for faults (broker/faults.py), as dispatch and handlers use it."""
    armed: bool
    latency_ms: dict[int, int]
    update_metadata_delay_ms: dict[int, int]

    async def intercept(self, api_key: int, req: Any, ctx: RequestContext) -> Any: ...

    async def delay_response(self, node_id: int, api_key: int) -> None: ...

    def take_lost_update_metadata(self, broker_id: int) -> bool: ...

    def pop_topic_error(self, api_key: int, topic: str) -> tuple[int, int]: ...

    def pop_stall_ms(self, api_key: int) -> int: ...


class FaultAdmin(Protocol):
    """The cluster's FaultControl runner, present with `serve --faults` (k1004)."""

    async def handle(self, req: Any, node_id: int) -> FaultControlResponse: ...


class RequestStats(Protocol):
    def request_done(self, api_key: int, seconds: float) -> None: ...


class FetchSessions(Protocol):
    """KIP-227 incremental fetch sessions (broker/fetch_session.py)."""

    def resolve(self, req: Any) -> tuple[int, Any, bool, list[Any]]: ...


class LocalBroker(Protocol):
    """This broker's identity and registration: what changes over its life (its port once it
    listens, its epoch once registered, the dynamic configs UpdateMetadata brings)."""
    node_id: int
    host: str
    port: int
    rack: str | None
    broker_epoch: int
    running: bool
    dynamic_configs: dict[str, dict[str, str]]
    fault_admin: FaultAdmin | None

    def apply_dynamic_configs(self, entries: Iterable[Any]) -> None: ...

    def listener_configs(self) -> tuple[str, str]:
        """(listeners, advertised.listeners) as Kafka writes them, with the bound ports."""
        ...

    async def next_producer_id(self) -> int: ...


@dataclass(slots=True)
class PendingMetadata:
    """UpdateMetadata's own state (k06): the delayed apply under way, and the pieces of topics
    not yet complete, per controller connection."""
    task: asyncio.Task[None] | None = None
    pieces: weakref.WeakKeyDictionary[Any, dict[str, Any]] = field(
        default_factory=weakref.WeakKeyDictionary)


@dataclass(frozen=True, slots=True)
class Services:
    """Everything a handler may use, built once per broker (dispatch copies nothing per request:
    a RequestContext holds this one reference)."""
    node: LocalBroker
    node_id: int
    config: ClusterConfig
    clock: Clock
    metadata: MetadataCache
    replica_manager: ReplicaManagerService
    groups: GroupCoordinatorService
    txn: TransactionCoordinatorService
    txn_verifier: TxnVerifier
    controller: ControllerChannel
    quota: MutationQuota
    faults: FaultHooks
    stats: RequestStats
    fetch_sessions: FetchSessions
    log_defaults: LogConfig
    pending_metadata: PendingMetadata
    # The APIs this broker serves and advertises: every registered one, or those of the Kafka
    # release it emulates (broker/releases.py); KIP-848's groups are off before Kafka 4.0.
    handlers: dict[int, Handler]
    consumer_group_protocol: bool
    # The users SASL authenticates (security/credentials.py); UpdateMetadata replaces the SCRAM
    # credentials, DescribeUserScramCredentials reads them.
    credentials: CredentialStore
    # KIP-11: the broker's authorizer (security/authorizer.py), None when authorizer.class.name
    # is empty (everything allowed, Kafka's default). Its ACLs change in place.
    authorizer: StandardAuthorizer | None = None
    transaction_verification: bool = True      # KIP-890 part 1: from Kafka 3.6
    # serve --trace / --strict: observes every client exchange (broker/trace.py); None: off.
    tracer: ExchangeObserver | None = None


@dataclass(slots=True)
class Handler:
    """A registered handler (dispatch's @handles): what dispatch and ApiVersions read."""
    api_key: int
    request_class: Any
    versions: tuple[int, int]
    fn: Callable[..., Awaitable[Any]]
    name: str
    raw: bool = False       # the handler gets the request body (a memoryview) and decodes it itself
    flexible_from: int = 1 << 15    # the first flexible version (request header v2)
    advertised: bool = True         # listed by ApiVersions (an emulated release hides our keys)


class RequestObserver(Protocol):
    """What the protocol trace gives dispatch for one request (broker/trace.py's _Exchange)."""

    def request(self, handler: Handler, header: RequestHeader, req: Any) -> Any:
        """Sees the request before its handler; returns what the handler gets: `req`, or for
        a raw Produce body the ProduceRequestView it decoded (the handler takes either)."""

    def response(self, resp: Any) -> None: ...


class ExchangeObserver(Protocol):
    """What serve --trace / --strict put around dispatch (broker/trace.py's Tracer)."""

    def dispatch(self, dispatch: Callable[..., Awaitable[list[Any] | None]], services: Services,
                 context: type[RequestContext], conn: Connection, frame: memoryview
                 ) -> Coroutine[Any, Any, list[Any] | None]: ...


class Connection(Protocol):
    """The client connection a request came on (network/tcp.py, network/memory.py)."""
    peer: tuple[str, int] | None
    local: tuple[str, int] | None
    principal: KafkaPrincipal
    listener: str


@dataclass(slots=True)
class RequestContext:
    services: Services
    header: RequestHeader
    api_version: int
    conn: Connection
    # The request's frame; None once the handler let it go (so the receive buffer can be reused).
    frame: memoryview | None
    control_plane: bool = False
    # Who sent it (the connection's authenticated principal) and on which listener (its name,
    # e.g. "PLAINTEXT", "SASL_SSL", "CONTROLLER"): what the authorizer decides on.
    principal: KafkaPrincipal = ANONYMOUS
    listener: str = "PLAINTEXT"

    @property
    def body(self) -> memoryview:
        assert self.frame is not None, "the handler let the frame go"
        return self.frame[self.header.body_offset:]

    @property
    def client_host(self) -> str:
        """The client's address, as ACL hosts name it (an in-memory pipe's is "memory")."""
        peer = self.conn.peer
        return str(peer[0]) if peer else ""

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether the principal may do `operation` on the resource (KIP-11); always, without
        an authorizer (authorizer.class.name empty, Kafka's default): one attribute test."""
        authorizer = self.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.principal, self.client_host, operation, resource_type,
                                    name)

    # The services handlers use, one attribute each. They are class attributes of the broker's
    # own subclass (context_class, built once per broker): reading one costs what reading a field
    # does, and building a context per request copies none of them.
    node_id: ClassVar[int]
    node: ClassVar[LocalBroker]
    clock: ClassVar[Clock]
    config: ClassVar[ClusterConfig]
    metadata: ClassVar[MetadataCache]
    replica_manager: ClassVar[ReplicaManagerService]
    groups: ClassVar[GroupCoordinatorService]
    txn: ClassVar[TransactionCoordinatorService]
    controller: ClassVar[ControllerChannel]
    quota: ClassVar[MutationQuota]
    faults: ClassVar[FaultHooks]
    authorizer: ClassVar[StandardAuthorizer | None]


CONTEXT_SERVICES = ("node_id", "node", "clock", "config", "metadata", "replica_manager", "groups",
                    "txn", "controller", "quota", "faults", "authorizer")


def context_class(services: Services) -> type[RequestContext]:
    """The RequestContext class of one broker: `services` as its class attributes."""
    assert set(CONTEXT_SERVICES) == {n for n, t in RequestContext.__annotations__.items()
                                     if t.startswith("ClassVar")}
    attrs: dict[str, object] = {name: getattr(services, name) for name in CONTEXT_SERVICES}
    return type("RequestContext", (RequestContext,), {"__slots__": (), **attrs})
