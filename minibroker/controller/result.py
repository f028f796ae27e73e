"""What a controller operation returns (Kafka's ControllerResult), and how a procedure can end.

An operation is a plain function `op(image, request, ids) -> Result(records, response)`: it reads
the frozen image and decides; the controller appends the records, replays them into a
MetadataDelta and only then answers with the response.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Generic, Iterable, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Result(Generic[T]):
    records: tuple[Any, ...]  # in log order (kafka-python ApiData records: untyped)
    response: T
    # The same records cut into log steps, for a procedure whose half-done state must be
    # resumable from the log (KIP-253's two steps); empty: one step.
    steps: tuple[tuple[Any, ...], ...] = ()

    @classmethod
    def in_steps(cls, steps: Iterable[Iterable[Any]], response: T) -> "Result[T]":
        cut = tuple(tuple(s) for s in steps)
        return cls(tuple(r for s in cut for r in s), response, cut)

    def log_steps(self) -> tuple[tuple[Any, ...], ...]:
        return self.steps or (self.records,)


@dataclass(frozen=True, slots=True)
class ItemResult:
    """One topic's answer to CreateTopics, DeleteTopics, CreatePartitions or AlterConfigs."""
    error_code: int = 0
    message: str | None = None
    topic_id: uuid.UUID | None = None
    partitions: int = -1
    replication_factor: int = -1


class ControllerHalted(Exception):
    """A named fault site stopped the controller between two steps of a procedure."""


class ControllerMoved(Exception):
    """A call reached a controller that is no longer active, before it wrote anything: the
    caller may send it to the next one (Kafka's NOT_CONTROLLER, retried by the forwarder)."""
