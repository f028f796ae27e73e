"""A small topology model: source -> repartition -> changelog topics, in sub-topologies.

    builder = StreamsBuilder()
    (builder.stream("orders")
            .map(lambda k, v: (k, v))            # (key, value) -> (key, value) | None (dropped)
            .repartition("by-customer")          # ends sub-topology 0 (+ a repartition topic)
            .aggregate("totals", lambda: b"0", lambda k, v, agg: ...)   # sub-topology 1, with a
            .to("totals-out"))                   # store backed by <app>-totals-changelog
    topology = builder.build()

Sub-topologies are split at repartition topics: each reads its source topics (user topics or a
repartition topic) and has one task per partition number (Kafka's StreamTask, "0_3").
Intended partition counts (Kafka's InternalTopicManager/RepartitionTopics): a repartition topic
gets the largest count among the source topics of the sub-topology that writes it; a changelog
gets its sub-topology's task count. Keys and values are bytes throughout.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["StreamsBuilder", "KStream", "SubTopology", "Topology"]

Mapper = Callable[[bytes, bytes], "tuple[bytes, bytes] | None"]


@dataclass
class SubTopology:
    id: int
    sources: list[str]                  # topic names (repartition: "<app>-<name>-repartition")
    steps: list[tuple] = field(default_factory=list)  # ("map", fn) | ("aggregate", store, init, fn)
    sink: str | None = None
    store: str | None = None
    changelog: str | None = None


class Topology:
    def __init__(self, subtopologies: list[SubTopology], internal: list[str]) -> None:
        self.subtopologies = subtopologies
        self.internal_topics = internal           # repartition and changelog topics, in order

    @property
    def external_sources(self) -> list[str]:
        return sorted({s for st in self.subtopologies for s in st.sources
                       if s not in self.internal_topics})

    @property
    def source_topics(self) -> list[str]:
        return sorted({s for st in self.subtopologies for s in st.sources})

    def subtopology_of(self, topic: str) -> SubTopology:
        return next(st for st in self.subtopologies if topic in st.sources)

    def subtopology_of_internal(self, topic: str) -> int:
        """The sub-topology whose width decides this internal topic's (its writer's)."""
        return next(st.id for st in self.subtopologies if topic in (st.sink, st.changelog))

    def intended_counts(self, external: dict[str, int]) -> tuple[dict[str, int], dict[int, int]]:
        """({internal topic: intended count}, {subtopology id: expected parallelism}) from the
        partition counts of the user's source topics (sub-topologies are in dependency order)."""
        topics: dict[str, int] = {}
        parallelism: dict[int, int] = {}
        for st in self.subtopologies:
            n = max(topics[s] if s in topics else external[s] for s in st.sources)
            parallelism[st.id] = n
            if st.changelog:
                topics[st.changelog] = n
            if st.sink in self.internal_topics:
                topics[st.sink] = n
        return topics, parallelism

    def describe(self) -> str:
        lines = []
        for st in self.subtopologies:
            lines.append(f"Sub-topology {st.id}: {' + '.join(st.sources)} -> "
                         + " -> ".join(s[0] + (f"({s[1]})" if s[0] == "aggregate" else "")
                                       for s in st.steps)
                         + (f" -> {st.sink}" if st.sink else "")
                         + (f"  [changelog {st.changelog}]" if st.changelog else ""))
        return "\n".join(lines)


class KStream:
    def __init__(self, builder: "StreamsBuilder", sub: SubTopology) -> None:
        self._builder = builder
        self._sub = sub

    def map(self, fn: Mapper) -> "KStream":
        self._sub.steps.append(("map", fn))
        return self

    def repartition(self, name: str) -> "KStream":
        """Write to an internal repartition topic; what follows is a new sub-topology."""
        topic = self._builder._internal(f"{name}-repartition")
        self._sub.sink = topic
        return KStream(self._builder, self._builder._new([topic]))

    def aggregate(self, store: str, initializer: Callable[[], bytes],
                  aggregator: Callable[[bytes, bytes, bytes], bytes]) -> "KStream":
        """Per-key state in a store backed by a changelog topic; emits each new aggregate."""
        if self._sub.store is not None:
            raise ValueError("one store per sub-topology in this model")
        self._sub.store = store
        self._sub.changelog = self._builder._internal(f"{store}-changelog")
        self._sub.steps.append(("aggregate", store, initializer, aggregator))
        return self

    def to(self, topic: str) -> None:
        self._sub.sink = topic


class StreamsBuilder:
    def __init__(self) -> None:
        self._subs: list[SubTopology] = []
        self._internal_names: list[str] = []

    def _new(self, sources: list[str]) -> SubTopology:
        st = SubTopology(len(self._subs), sources)
        self._subs.append(st)
        return st

    def _internal(self, suffix: str) -> str:
        self._internal_names.append(suffix)
        return "{app}-" + suffix

    def stream(self, *topics: str) -> KStream:
        return KStream(self, self._new(list(topics)))

    def build(self, application_id: str) -> Topology:
        """Internal topic names are prefixed with the application.id, as Kafka Streams does."""
        def name(t):
            return t.replace("{app}", application_id) if t else t
        subs = [SubTopology(st.id, [name(s) for s in st.sources], list(st.steps), name(st.sink),
                            st.store, name(st.changelog)) for st in self._subs]
        internal = [f"{application_id}-{s}" for s in self._internal_names]
        return Topology(subs, internal)
