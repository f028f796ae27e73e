"""The package's shape, read from its source (ast): the layers (one table, imports only point down),
no import circle, no import hidden in a function to dodge one, handlers typed and kept off the
log, and the handler registry complete.

Every import counts, wherever it is: module level, inside a function, and under
`if TYPE_CHECKING:` (a circle only typing needs is still a circle a reader must untangle).
"""
from __future__ import annotations

import ast
import functools
import pathlib
import re

import pytest

import minibroker

PACKAGE = pathlib.Path(minibroker.__file__).parent

# Imports inside functions that stay, each for a reason other than an import circle: (importing
# module, imported package module or third-party distribution).
FUNCTION_LEVEL_ALLOWED = {
    # Command-line start-up: `minibroker --help` and the admin subcommands do not load the broker,
    # and each subcommand loads only what it uses.
    ("minibroker.cli.serve", "minibroker.cluster"),
    ("minibroker.cli.serve", "minibroker.log.memory"),
    ("minibroker.cli.serve", "minibroker.log.config"),
    ("minibroker.cli", "minibroker"),                   # __version__ (the package imports Cluster)
    ("minibroker.cli", "minibroker.cli.topics"),
    ("minibroker.cli", "minibroker.cli.reassign"),
    ("minibroker.cli", "minibroker.cli.groups"),
    ("minibroker.cli", "minibroker.cli.configs"),
    ("minibroker.cli", "minibroker.cli.transactions"),
    ("minibroker.cli", "minibroker.cli.faults"),
    ("minibroker.cli", "minibroker.cli.acls"),
    ("minibroker.cli", "minibroker.cli.serve"),
    ("minibroker.cli", "minibroker.cli.console"),
    ("minibroker.cli", "minibroker.cli.kafka_home"),
    ("minibroker.cli", "minibroker.cli.offsets_tools"),
    ("minibroker.cli", "minibroker.cli.leader_election"),
    ("minibroker.cli", "minibroker.cli.console_tools"),
    ("minibroker.cli", "minibroker.cli.log_dirs"),
    ("minibroker.cli", "minibroker.cli.metadata_quorum"),
    ("minibroker.cli", "minibroker.cli.features"),
    ("minibroker.cli", "minibroker.cli.trace"),
    # The `console` extra: loaded only by `minibroker console` and `serve --console-port`.
    ("minibroker.cli.console", "minibroker.console.server"),
    ("minibroker.cli.console", "jinja2"),
    ("minibroker.cli.console", "starlette"),
    ("minibroker.cli.console", "uvicorn"),
    ("minibroker.cli.serve", "minibroker.console.server"),
    ("minibroker.cli.serve", "minibroker.cli.console"),
    ("minibroker.cli.serve", "minibroker.metrics"),           # only with serve --metrics-port
    ("minibroker.processes.node", "minibroker.metrics"),      # (prometheus_client: an extra)
    ("minibroker.cli.serve", "minibroker.processes"),         # only with serve --processes
    ("minibroker.cli.common", "minibroker.network.client"),
    ("minibroker.cli.common", "kafka"),                 # ApiVersions and error names, on use
    ("minibroker.cli.common", "minibroker.client.security"),     # --command-config's security
    ("minibroker.cli.common", "minibroker.network.sasl_client"),  # (kafka-python, scramp): on use
    ("minibroker.cli.reassign", "kafka"),
    ("minibroker.cli.reassign", "minibroker.protocol.errors"),
    # The pytest11 plugin loads in every pytest run of a project that installs minibroker: the
    # cluster is imported only when its fixture is used.
    ("minibroker.testing.pytest_plugin", "minibroker.testing.threaded"),
    # Optional dependencies, imported only where installed and wanted.
    ("minibroker.cli.serve_security", "minibroker.security.certs"),   # cryptography: --tls-dir
    ("minibroker.testing.security", "minibroker.security.certs"),     # cryptography: tls_dir=
    ("minibroker.cli.serve", "uvloop"),
    ("minibroker.processes.__main__", "uvloop"),        # a broker process's loop, as serve's
    ("minibroker.cli.serve", "prometheus_client"),            # the `metrics` extra, for --metrics-port
    ("minibroker.log.records_check", "zstandard"),      # compression codecs a batch may use
    ("minibroker.log.codecs", "zstandard"),
    ("minibroker.log.codecs", "lz4"),
    ("minibroker.log.records_check", "lz4"),
    ("minibroker.log.records_check", "cramjam"),
    # The `spark` extra: `import minibroker.spark` and the checker's pandas back-end (the KIP-253
    # conformance scenario's checker) work without pyspark; register() and check_spark need it.
    ("minibroker.spark", "minibroker.spark.source"),
    ("minibroker.spark.checker", "pyspark"),
    ("minibroker.spark.checker", "minibroker.spark.session"),
}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The package module an imported name lives in (a module, or a name in a module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str):
    """(imported name, inside a function?) for every import statement of `module`."""
    tree = ast.parse(MODULES[module].read_text())
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]

    def walk(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, inner
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for alias in child.names:
                    yield f"{base}.{alias.name}", inner
            yield from walk(child, inner)
    yield from walk(tree, False)


@functools.cache
def _graph() -> dict[str, set[str]]:
    graph = {}
    for module in MODULES:
        targets = {_resolve(name) for name, _ in _imports(module)}
        # A package's own __init__ is not an edge of its submodules (Python runs it first anyway).
        graph[module] = {t for t in targets if t and t != module
                         and not (module.startswith(t + ".") and MODULES[t].name == "__init__.py")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _function_level_imports() -> list[tuple[str, str]]:
    """(module, what it imports inside a function: a package module, else a distribution)."""
    found = []
    for module in MODULES:
        for name, in_function in _imports(module):
            target = _resolve(name) or name.split(".")[0]
            if in_function and (module, target) not in FUNCTION_LEVEL_ALLOWED:
                found.append((module, target))
    return sorted(set(found))


# The layers, lowest first. A package (or root module) imports only from layers below its own,
# never from its own layer's other packages nor from above: the table is the whole picture.
LAYERS: list[set[str]] = [
    {"protocol", "security", "clock", "ids", "partitioning",   # wire formats, time, randomness,
     "loop_thread"},                                           # a loop in a thread
    {"log", "network"},             # record batches and partition logs; frames over transports
    {"config"},                     # every default, with Kafka's names (topic ones from log/)
    {"metadata"},                   # what a broker knows of the cluster (UpdateMetadata's cache)
    {"coordinator", "controller"},  # groups/offsets/transactions; the metadata image and its log
    {"broker"},                     # dispatch, handlers, the replica manager
    {"metrics"},                    # reads the brokers of a Cluster or of one broker process
    {"cluster", "processes"},       # brokers + controller in one process, or one per process
    {"client"},                     # the reference client (its streams example runs a Cluster)
    {"testing", "spark", "console"},
    {"cli"},
    {"__main__", "minibroker"},     # `python -m minibroker`; the public surface
]


def _layer_of(module: str) -> str:
    parts = module.split(".")
    return "minibroker" if len(parts) == 1 else parts[1]


def _upward_or_sideways_imports(graph: dict[str, set[str]] | None = None
                                ) -> list[tuple[str, str]]:
    level = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    bad = []
    for module, targets in (_graph() if graph is None else graph).items():
        a = _layer_of(module)
        for target in targets:
            b = _layer_of(target)
            if a != b and level[b] >= level[a]:
                bad.append((module, target))
    return sorted(bad)


def test_every_package_has_a_layer():
    assert {_layer_of(m) for m in MODULES} == set().union(*LAYERS)


def test_no_import_points_up_or_sideways_across_the_layers():
    assert _upward_or_sideways_imports() == []


def test_the_layer_check_sees_an_upward_and_a_sideways_import():
    graph = {"minibroker.log.batch": {"minibroker.broker.dispatch", "minibroker.protocol.varint"},
             "minibroker.controller.topics": {"minibroker.coordinator.offsets"},
             "minibroker.broker.dispatch": {"minibroker.broker.context", "minibroker.log.batch"}}
    assert _upward_or_sideways_imports(graph) == [
        ("minibroker.controller.topics", "minibroker.coordinator.offsets"),
        ("minibroker.log.batch", "minibroker.broker.dispatch")]


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    assert _cycles(_graph()) == []


def test_no_import_cycle_through_the_coordinator_or_the_client():
    def ours(module: str) -> bool:
        return module.startswith(("minibroker.coordinator", "minibroker.client.")) and \
            not module.startswith("minibroker.client.streams")
    assert [c for c in _cycles(_graph()) if any(ours(m) for m in c)] == []


def test_no_function_level_import_in_the_package():
    assert _function_level_imports() == []


def test_the_network_layer_knows_no_broker():
    graph = _graph()
    for module in [m for m in MODULES if m.startswith("minibroker.network")]:
        assert not {t for t in graph[module] if t.startswith(
            ("minibroker.broker", "minibroker.coordinator", "minibroker.controller",
             "minibroker.cluster"))}, module


HANDLER_MODULES = sorted(p.stem for p in (PACKAGE / "broker/handlers").glob("k*.py"))


@pytest.mark.parametrize("handler", HANDLER_MODULES)
def test_no_handler_touches_the_partition_log(handler):
    """Handlers go through the ReplicaManager: nothing they import reaches the log package (its
    topic config definitions aside), and no `.log.` attribute appears in their code."""
    module = f"minibroker.broker.handlers.{handler}"
    names = [name for name, _ in _imports(module)]
    assert [n for n in names if n.startswith("minibroker.log.")
            and not n.startswith("minibroker.log.config")] == []
    assert "PartitionLog" not in MODULES[module].read_text()
    assert ".log." not in re.sub(r'""".*?"""', "", MODULES[module].read_text(), flags=re.S)


def _handler_functions() -> list[tuple[str, ast.AsyncFunctionDef]]:
    out = []
    for handler in HANDLER_MODULES:
        tree = ast.parse(MODULES[f"minibroker.broker.handlers.{handler}"].read_text())
        out += [(handler, f) for f in tree.body if isinstance(f, ast.AsyncFunctionDef)
                and any("handles" in ast.unparse(d) for d in f.decorator_list)]
    return out


def test_every_handler_signature_is_typed_without_any():
    """(ctx: RequestContext, req: <its request class>) -> <its response>: what a handler takes
    and gives is in its signature."""
    found = _handler_functions()
    assert len(found) == len(HANDLER_MODULES)
    untyped = []
    for handler, fn in found:
        annotations = [a.annotation for a in fn.args.args] + [fn.returns]
        first = fn.args.args[0]
        if (first.arg, ast.unparse(first.annotation)) != ("ctx", "RequestContext") \
                or any(a is None or "Any" in ast.unparse(a) for a in annotations):
            untyped.append(handler)
    assert untyped == []


def test_the_request_context_holds_no_any():
    """RequestContext and the Services it holds: each field and property typed, none Any."""
    classes = {c.name: c for c in ast.parse(MODULES["minibroker.broker.context"].read_text()).body
               if isinstance(c, ast.ClassDef)}
    for name in ("RequestContext", "Services"):
        assert "Any" not in ast.unparse(classes[name]), name
        assert [f.name for f in classes[name].body if isinstance(f, ast.FunctionDef)
                and f.returns is None] == [], name


def test_no_coordinator_module_imports_the_broker():
    """The coordinators read the metadata cache (minibroker.metadata), below both."""
    graph = _graph()
    assert {(m, t) for m in MODULES if m.startswith("minibroker.coordinator")
            for t in graph[m] if t.startswith("minibroker.broker")} == set()


def _record_constructions(module: str) -> list[str]:
    """Record classes of minibroker.protocol.records that `module` instantiates."""
    tree = ast.parse(MODULES[module].read_text())
    aliases, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "minibroker.protocol":
            aliases |= {a.asname or a.name for a in node.names if a.name == "records"}
        elif isinstance(node, ast.ImportFrom) and node.module == "minibroker.protocol.records":
            names |= {a.asname or a.name for a in node.names if a.name.endswith("Record")}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id in aliases and f.attr.endswith("Record"):
                found.append(f.attr)
            elif isinstance(f, ast.Name) and f.id in names:
                found.append(f.id)
    return found


def test_metadata_records_are_built_in_one_place():
    """controller/records.py builds every metadata record (the coordinators' records have their
    own *_records.py modules)."""
    assert _record_constructions("minibroker.controller.records")
    assert {m: _record_constructions(m) for m in MODULES
            if m != "minibroker.controller.records" and not m.endswith("_records")
            and _record_constructions(m)} == {}


def test_handlers_are_all_listed_in_key_order():
    listed = [m for m in re.findall(r"^\s+(k\d+_\w+),", (PACKAGE / "broker/handlers/__init__.py")
                                    .read_text(), re.M)]
    files = sorted(p.stem for p in (PACKAGE / "broker/handlers").glob("k*.py"))
    assert sorted(listed) == files
    keys = [int(re.match(r"k(\d+)_", m).group(1)) for m in listed]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_nothing_shipped_points_into_the_shared_directory():
    """A clone has no ../shared: the code, schemas and docs carry what they need themselves."""
    root = PACKAGE.parent
    shipped = [root / "CONTRACTS.md", root / "README.md",
               *sorted((root / "minibroker").rglob("*.py")), *sorted((root / "schemas").rglob("*"))]
    assert [str(p.relative_to(root)) for p in shipped
            if p.is_file() and "../shared" in p.read_text(errors="replace")] == []
