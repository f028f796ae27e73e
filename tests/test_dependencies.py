"""pyproject's dependencies are exactly what the package imports outside its optional extras:
nothing declared and unused (sortedcontainers was), nothing imported and undeclared."""
from __future__ import annotations

import ast
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Import name -> distribution name, where they differ.
DIST = {"kafka": "kafka-python", "prometheus_client": "prometheus_client"}
# Modules of optional extras (imported only by their features): extra -> import names.
EXTRAS = {"spark": {"pyspark", "pandas", "pyarrow", "numpy"}, "metrics": {"prometheus_client"},
          "codecs": {"cramjam", "lz4", "zstandard", "snappy"},
          "console": {"starlette", "uvicorn", "jinja2"}, "security": {"cryptography"},
          # not extras, and not dependencies either: pytest loads the pytest11 plugin itself;
          # google_crc32c stands in only where crc32c does not install
          "": {"pytest", "google_crc32c"}}
# Packages that belong to optional features living in the package tree.
OPTIONAL_TREES = ("minibroker/spark", "minibroker/console", "pyspark_minibroker")


def _imports() -> set[str]:
    names = set()
    for path in (ROOT / "minibroker").rglob("*.py"):
        if str(path.relative_to(ROOT)).startswith(OPTIONAL_TREES):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "minibroker"}


def _declared() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=;\[ ]", d, maxsplit=1)[0].strip().lower(): d for d in deps}


def test_dependencies_are_what_is_imported():
    optional = set().union(*EXTRAS.values())
    required = {DIST.get(n, n).lower() for n in _imports() - optional}
    assert required == set(_declared()), (required, set(_declared()))
