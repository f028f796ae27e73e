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

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__all__ = ["PACKAGE", "SCHEMAS_DIR", "SUBPACKAGES", "package", "share_nested_classes"]

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


def share_nested_classes(cls: type) -> type:
    """Give nested structs of the same type name one data class, throughout ``cls``.

    kafka-python makes a separate class per field, so e.g. ``Assignment`` and ``TargetAssignment``
    (both of type ``Assignment``) decode to two different classes and never compare equal to values
    built from ``cls.<...>.Assignment``.  Call this right after defining a class, before any
    encode/decode (codegen reads the data class lazily).  Returns ``cls``.
    """
    shared: dict[str, type] = {}

    def visit(struct, container: type) -> None:
        for field in struct._fields:
            if field.is_struct_array():
                inner = field.array_of
            elif field.is_struct():
                inner = field
            else:
                continue
            name = field.type_str
            first = shared.setdefault(name, inner.data_class)
            if inner.data_class is not first:
                if inner._fields != first._struct._fields:
                    raise TypeError(f"{cls.__name__}: two different structs are both named {name}")
                inner._data_class = first
            setattr(container, name, first)
            visit(inner, first)

    visit(cls._struct, cls)
    return cls
