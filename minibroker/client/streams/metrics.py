"""A small client metrics registry: (name, group, tags) -> value, as Kafka's MetricName.

KIP-878's metrics live here: `current-subtopology-parallelism` and
`expected-subtopology-parallelism` (group stream-subtopology-metrics, tag subtopology-id) and
`num-autoscaling-failures` (group stream-client-metrics, tag client-id).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True, order=True)
class MetricName:
    name: str
    group: str
    tags: tuple[tuple[str, str], ...] = ()

    def tag(self, key: str) -> str | None:
        return dict(self.tags).get(key)


class Metrics:
    def __init__(self) -> None:
        self._values: dict[MetricName, float] = {}

    @staticmethod
    def name(name: str, group: str, **tags: str) -> MetricName:
        return MetricName(name, group, tuple(sorted((k.replace("_", "-"), str(v))
                                                    for k, v in tags.items())))

    def set(self, metric: MetricName, value: float) -> None:
        self._values[metric] = value

    def add(self, metric: MetricName, delta: float = 1) -> None:
        self._values[metric] = self._values.get(metric, 0) + delta

    def value(self, name: str, group: str | None = None, **tags: str) -> float | None:
        """The value of the one metric that matches (tags given with - or _), None if none."""
        want = {k.replace("_", "-"): str(v) for k, v in tags.items()}
        for m, v in sorted(self._values.items()):
            if m.name == name and (group is None or m.group == group) and \
                    all(m.tag(k) == v for k, v in want.items()):
                return v
        return None

    def remove(self, metric: MetricName) -> None:
        self._values.pop(metric, None)

    def __iter__(self) -> Iterator[tuple[MetricName, float]]:
        return iter(sorted(self._values.items()))
