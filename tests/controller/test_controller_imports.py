"""The controller package's shape (issue 21): no import inside a function, no import circle among
its modules, and the planning modules pure — they know the image, the request and ids, never the
Controller, the network or the event loop."""
from __future__ import annotations

import ast
from pathlib import Path

import minibroker.controller

PACKAGE = Path(minibroker.controller.__file__).parent
PURE = ["brokers", "partition_count", "partitions", "placement", "reassignment", "records",
        "result", "topics", "image", "delta"]
IMPURE = ("asyncio", "minibroker.network", "minibroker.controller.controller",
          "minibroker.controller.propagator", "minibroker.controller.log_bounds",
          "minibroker.cluster")


def _imports(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names]
    return out


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text()) for p in sorted(PACKAGE.glob("*.py"))}


def test_no_import_inside_a_function_or_class():
    found = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found += [f"{name}.{node.name}" for sub in ast.walk(node)
                          if isinstance(sub, (ast.Import, ast.ImportFrom))]
    assert found == []


def test_no_import_circle_between_controller_modules():
    prefix = "minibroker.controller."
    graph = {name: sorted({i[len(prefix):].split(".")[0] for i in _imports(tree)
                           if i.startswith(prefix)} - {name})
             for name, tree in _modules().items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, f"import circle: {' -> '.join(path + [name])}"
        if name in done:
            return
        for dep in graph.get(name, ()):
            visit(dep, path + [name])
        done.add(name)

    for name in graph:
        visit(name, [])


def test_planning_modules_know_no_controller_network_or_event_loop():
    modules = _modules()
    assert set(PURE) <= set(modules)
    for name in PURE:
        bad = [i for i in _imports(modules[name]) if i.startswith(IMPURE)]
        assert bad == [], name
        assert not any(isinstance(n, ast.AsyncFunctionDef) for n in ast.walk(modules[name])), name
