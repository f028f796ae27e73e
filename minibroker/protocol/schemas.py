"""Where our Kafka-format JSON message definitions live, and how kafka-python finds them.

kafka-python's ``load_json=`` class keyword wants an importable package name and reads
``<package>/<ClassName>.json`` through ``importlib.resources``.  ``schemas/`` at the top of the
repository is not a Python package, so we register it once, under a private name, as a namespace
package (a ``ModuleSpec`` whose ``submodule_search_locations`` is the folder).  Its subfolders
(``message``, ``extensions``, ``records``) then import as implicit namespace packages, from any
working directory.

An installed wheel carries the same files as ``minibroker/_schemas`` (in a checkout that path is a
symlink to ``../schemas``), and that location wins when it exists.

This is the only module that knows where ``schemas/`` is.
"""
from __future__ import annotations

import contextlib
import copy
import importlib.machinery
import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator

from kafka.protocol.data_container import DataContainer

__all__ = ["PACKAGE", "SCHEMAS_DIR", "SUBPACKAGES", "loading", "package", "share_nested_classes"]

#: The private top-level module name under which ``schemas/`` is importable.
PACKAGE = "_minibroker_schemas"
#: The subfolders of ``schemas/`` that hold definitions.
SUBPACKAGES = ("message", "extensions", "records")


def _locate() -> Path:
    here = Path(__file__).resolve()
    bundled = here.parents[1] / "_schemas"  # minibroker/_schemas: wheel copy, or symlink in a checkout
    if bundled.is_dir():
        return bundled.resolve()
    return here.parents[2] / "schemas"  # the repository root


SCHEMAS_DIR: Path = _locate()


def _register() -> None:
    existing = sys.modules.get(PACKAGE)
    if existing is not None:
        locations = list(getattr(existing, "__path__", []))
        if locations != [str(SCHEMAS_DIR)]:
            raise ImportError(f"{PACKAGE} is already registered for {locations}, not {SCHEMAS_DIR}")
        return
    if not SCHEMAS_DIR.is_dir():
        raise ImportError(f"minibroker schemas folder not found at {SCHEMAS_DIR}")
    spec = importlib.machinery.ModuleSpec(PACKAGE, None, is_package=True)
    spec.submodule_search_locations = [str(SCHEMAS_DIR)]
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module


def package(sub: str) -> str:
    """Importable package name for ``schemas/<sub>``, for kafka-python's ``load_json=``."""
    if sub not in SUBPACKAGES:
        raise ValueError(f"unknown schemas subfolder {sub!r}; expected one of {SUBPACKAGES}")
    name = f"{PACKAGE}.{sub}"
    importlib.import_module(name)  # fail here, clearly, rather than inside kafka-python
    return name


_register()


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Wrap class definitions that load our JSON: kafka-python reads it with the legacy
    ``importlib.resources`` API, which warns on every class in Python 3.11+."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"(open|read)_text is deprecated", DeprecationWarning)
        yield


def share_nested_classes(cls: type[Any]) -> type[Any]:
    """Give nested structs of the same type name one data class, throughout ``cls``.

    kafka-python makes a separate class per field, so e.g. ``Assignment`` and ``TargetAssignment``
    (both of type ``Assignment``) decode to two different classes and never compare equal to values
    built from ``cls.<...>.Assignment``.  Structs sharing a name must have the same fields; the shared
    class accepts the union of their version ranges (a common struct used by a v0-1 field and a v2+
    field).  Call this right after defining a class, before any encode/decode (codegen reads the
    data classes lazily).  Returns ``cls``.
    """
    groups: dict[str, list[Any]] = {}

    def inner_of(field: Any) -> Any:
        if field.is_struct_array():
            return field.array_of
        if field.is_struct():
            return field
        return None

    def collect(struct: Any) -> None:
        for field in struct._fields:
            inner = inner_of(field)
            if inner is not None:
                groups.setdefault(field.type_str, []).append(inner)
                collect(inner)

    collect(cls._struct)
    shared: dict[str, type] = {}
    for name, structs in groups.items():
        first = structs[0]
        if len(structs) == 1:
            shared[name] = first.data_class
            continue
        for other in structs[1:]:
            if other._fields != first._fields:
                raise TypeError(f"{cls.__name__}: two different structs are both named {name}")
        widened = copy.copy(first)
        widened._versions = (min(s._versions[0] for s in structs), max(s._versions[1] for s in structs))
        data_class = type(name, (DataContainer,), {"_struct": widened, "__module__": cls.__module__})
        widened._data_class = data_class
        for struct in structs:
            struct._data_class = data_class
        shared[name] = data_class

    def attach(struct: Any, container: type) -> None:
        for field in struct._fields:
            inner = inner_of(field)
            if inner is not None:
                setattr(container, field.type_str, shared[field.type_str])
                attach(inner, shared[field.type_str])

    attach(cls._struct, cls)
    return cls
