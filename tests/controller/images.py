"""Controller images built from records, as Kafka's image tests build them: a record list is
replayed into a MetadataDelta and applied. Fixed topic ids; broker i has epoch 100 + i."""
from __future__ import annotations

import uuid

from minibroker.controller import records
from minibroker.controller.delta import MetadataDelta
from minibroker.controller.image import MetadataImage

A = uuid.UUID(int=0xA)          # topic ids
B = uuid.UUID(int=0xB)


def replay(out, image: MetadataImage = MetadataImage()) -> MetadataImage:
    """The image after appending `out` to a log whose last offset is image.offset."""
    delta = MetadataDelta(image)
    for r in out:
        delta.replay(r, delta.offset + 1)
    return delta.apply()


def brokers(*ids: int, fenced: tuple[int, ...] = (), rack=lambda i: None) -> list:
    out = []
    for i in ids:
        out.append(records.register_broker(i, 100 + i, "127.0.0.1", 9000 + i, rack(i)))
        if i not in fenced:
            out.append(records.unfence_broker(i, 100 + i))
    return out


def topic(name: str, topic_id: uuid.UUID, assignment: dict[int, tuple[int, ...]],
          configs: dict[str, str] | None = None) -> list:
    """A topic as CreateTopics writes it; every replica in the ISR, the first one leads."""
    alive = {r for reps in assignment.values() for r in reps}
    n = len(assignment)
    return ([records.topic(name, topic_id), records.partition_count(topic_id, n, n)]
            + [records.topic_config(name, k, v) for k, v in sorted((configs or {}).items())]
            + records.partitions(topic_id, assignment, alive))
