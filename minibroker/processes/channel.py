"""A broker process's ControllerChannel: each call goes to the active controller, wherever the
quorum elected it — this process's own, or another's over their link (mesh.py) — and again to the
next one when that one stopped leading (KIP-590's forwarding retries NOT_CONTROLLER)."""
from __future__ import annotations

import asyncio
from typing import Any, Protocol

from minibroker.broker.context import ControllerChannel, ItemResult
from minibroker.controller.quorum import QuorumInfo
from minibroker.controller.result import ControllerMoved
from minibroker.security.acl import AclBinding, AclBindingFilter

# What a broker may ask of the controller: ControllerChannel's methods (a broker process answers
# these and a broker's registration, nothing else).
CALLS = frozenset(name for name, member in vars(ControllerChannel).items()
                  if not name.startswith("_") and callable(member))
# How long a call waits for a controller (Kafka's request.timeout.ms for forwarding).
CALL_TIMEOUT_S = 30.0


class PeerGone(ConnectionError):
    """The process a call went to died before answering (nothing known of its outcome)."""


class Router(Protocol):
    node_id: int

    def leader_id(self) -> int: ...

    async def leader_change(self, timeout: float) -> None: ...

    async def local_call(self, method: str, args: tuple, kw: dict) -> Any: ...

    async def remote_call(self, dest: int, method: str, args: tuple, kw: dict) -> Any: ...


class RemoteControllerChannel:
    """ControllerChannel for a broker in its own process: each call to the active controller."""

    def __init__(self, router: Router) -> None:
        self._router = router

    async def call(self, method: str, *args: Any, **kw: Any) -> Any:
        """`method` on the active controller; on the next one if that one stopped leading
        before it wrote anything, or its process died (up to CALL_TIMEOUT_S)."""
        r = self._router
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CALL_TIMEOUT_S
        while loop.time() < deadline:
            leader = r.leader_id()
            if leader < 0:
                await r.leader_change(min(0.1, max(deadline - loop.time(), 0)))
                continue
            try:
                if leader == r.node_id:
                    return await r.local_call(method, args, kw)
                return await r.remote_call(leader, method, args, kw)
            except (ControllerMoved, PeerGone):
                await r.leader_change(0.05)
        raise asyncio.TimeoutError(f"no active controller answered {method} in "
                                   f"{CALL_TIMEOUT_S:.0f} s")

    def auto_create_topics(self, names: list[str]) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self.call("auto_create_topics", names))

    # ControllerChannel's methods, each the active Controller's method of the name.
    async def alter_partition(self, broker_id: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                              ) -> int:
        return await self.call("alter_partition", broker_id, topic, partition, leader_epoch,
                               partition_epoch, new_isr)

    async def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        return await self.call("allocate_producer_ids", count)

    async def create_topics(self, specs: list[Any], validate_only: bool) -> list[ItemResult]:
        return await self.call("create_topics", specs, validate_only)

    async def delete_topics(self, names: list[str]) -> list[ItemResult]:
        return await self.call("delete_topics", names)

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> ItemResult:
        return await self.call("create_partitions", name, count, assignments, validate_only)

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None], replace: bool,
                                  validate_only: bool) -> ItemResult:
        return await self.call("alter_topic_configs", name, changes, replace, validate_only)

    async def alter_broker_configs(self, resource_name: str, changes: dict[str, str | None],
                                   validate_only: bool, replace: bool = False
                                   ) -> ItemResult:
        return await self.call("alter_broker_configs", resource_name, changes, validate_only,
                               replace)

    async def alter_group_configs(self, group_id: str, changes: dict[str, str | None],
                                  validate_only: bool, replace: bool = False) -> ItemResult:
        return await self.call("alter_group_configs", group_id, changes, validate_only, replace)

    async def describe_group_configs(self, group_id: str) -> dict[str, str]:
        return await self.call("describe_group_configs", group_id)

    async def alter_user_scram_credentials(self, deletions: list[tuple[str, int]],
                                           upsertions: list[Any]) -> list[Any]:
        return await self.call("alter_user_scram_credentials", deletions, upsertions)

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[int, str | None]]:
        return await self.call("create_acls", bindings)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[Any]:
        return await self.call("delete_acls", filters)

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                            ) -> Any:
        return await self.call("elect_leaders", election_type, partitions)

    async def assign_partitions(self, assignments: list[tuple[str, int, list[int]]]) -> Any:
        return await self.call("assign_partitions", assignments)

    async def alter_partition_reassignments(self, items: list[Any], allow_rf_change: bool
                                            ) -> list[Any]:
        return await self.call("alter_partition_reassignments", items, allow_rf_change)

    async def list_partition_reassignments(self, wanted: dict[str, list[int]] | None
                                           ) -> list[Any]:
        return await self.call("list_partition_reassignments", wanted)

    async def partition_assignment_status(self, request_id: int) -> Any:
        return await self.call("partition_assignment_status", request_id)

    async def describe_quorum(self) -> QuorumInfo:
        return await self.call("describe_quorum")
