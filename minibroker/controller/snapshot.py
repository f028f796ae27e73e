"""A metadata image as text and back: the contents of a metadata snapshot file.

KRaft writes a snapshot as the records that rebuild the image; here the frozen image itself is
written (JSON, every dataclass, mapping, tuple, set and uuid tagged with its kind), which gives
back an equal image with no record spelling to keep in step with replay. Mappings keep their
order; sets are written sorted.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from types import MappingProxyType
from typing import Any, Mapping

from minibroker.controller.image import (BrokerRegistration, MetadataImage, PartitionRegistration,
                                         Reassignment, TopicImage)
from minibroker.security.acl import AclBinding
from minibroker.security.credentials import ScramCredential

_CLASSES = {c.__name__: c for c in (BrokerRegistration, MetadataImage, PartitionRegistration,
                                    Reassignment, TopicImage, AclBinding, ScramCredential)}


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {"@": type(value).__name__,
                **{f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, uuid.UUID):
        return {"@uuid": str(value)}
    if isinstance(value, bytes):                # SCRAM salts and keys
        return {"@bytes": base64.b64encode(value).decode()}
    if isinstance(value, Mapping):
        return {"@map": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"@tuple": [_encode(v) for v in value]}
    if isinstance(value, frozenset):
        return {"@frozenset": sorted((_encode(v) for v in value), key=json.dumps)}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "@" in value:
        cls = _CLASSES[value["@"]]
        return cls(**{k: _decode(v) for k, v in value.items() if k != "@"})
    if "@uuid" in value:
        return uuid.UUID(value["@uuid"])
    if "@bytes" in value:
        return base64.b64decode(value["@bytes"])
    if "@map" in value:
        return MappingProxyType({_decode(k): _decode(v) for k, v in value["@map"]})
    if "@tuple" in value:
        return tuple(_decode(v) for v in value["@tuple"])
    return frozenset(_decode(v) for v in value["@frozenset"])


def to_text(image: MetadataImage) -> str:
    return json.dumps(_encode(image), separators=(",", ":"))


def from_text(text: str) -> MetadataImage:
    image: MetadataImage = _decode(json.loads(text))
    return image
