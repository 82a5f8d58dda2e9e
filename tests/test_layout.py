"""The package's layout, read from its source (ast): no private names taken from another
module, no import cycle through the registry, views as tools or their neighbours nor
among the transports, and no transport imported by what the transports build on."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import mcp_django

PACKAGE = Path(mcp_django.__file__).parent

# Modules that must be in no import cycle (deferred imports count; TYPE_CHECKING ones do not).
ACYCLIC = ("mcp_django.registry", "mcp_django.handlers", "mcp_django.protected_resource", "mcp_django.auth")

TRANSPORTS = "mcp_django.transports"
# What the transports build on: none of it may import a transport.
BELOW_TRANSPORTS = (
    "mcp_django.registry",
    "mcp_django.handlers",
    "mcp_django.protocol",
    "mcp_django.asks",
    "mcp_django.resource_updates",
    "mcp_django.worker_channel",
    "mcp_django.pipeline",
)


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["mcp_django", *path.relative_to(PACKAGE).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


MODULES = _modules()


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node below ``node`` except those under ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
            for other in child.orelse:
                yield other
                yield from _runtime_nodes(other)
            continue
        yield child
        yield from _runtime_nodes(child)


def _source_module(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - node.level + 1]
    return ".".join([*parts, *([node.module] if node.module else [])])


@functools.cache
def _imports(module: str) -> tuple[tuple[str, str | None, int], ...]:
    """(imported module, name taken from it or None, line) for each runtime import of ``module``;
    read once per run (the checks below read every module's, each parse costs)."""
    return tuple(_read_imports(module))


def _read_imports(module: str) -> Iterator[tuple[str, str | None, int]]:
    path, is_package = MODULES[module]
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            source = _source_module(module, is_package, node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:
                    yield submodule, None, node.lineno
                else:
                    yield source, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_a_private_name_from_another() -> None:
    found = {
        (module, source, name)
        for module in MODULES
        for source, name, _line in _imports(module)
        if name is not None and _is_private(name)
    }
    assert found == set(), "give these names a public spelling"


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        for target, _name, _line in _imports(module):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != module:
                graph.setdefault(module, set()).add(target)
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def test_the_registry_and_views_as_tools_are_in_no_import_cycle() -> None:
    graph = _graph()
    views_as_tools = [m for m in MODULES if m.startswith("mcp_django.views_as_tools")]
    assert "mcp_django.registry" in graph and views_as_tools  # the graph was read
    for module in [*ACYCLIC, *views_as_tools]:
        assert module not in _reachable(graph, module), f"{module} imports itself through others"


def test_no_module_of_the_package_is_in_an_import_cycle() -> None:
    graph = _graph()
    assert len(graph) > 40  # the graph was read
    in_cycles = sorted(module for module in MODULES if module in _reachable(graph, module))
    assert in_cycles == [], f"in an import cycle: {in_cycles}"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_nothing_the_transports_build_on_imports_a_transport() -> None:
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
        if any(_within(module, lower) for lower in BELOW_TRANSPORTS)
        for target in targets
        if _within(target, TRANSPORTS)
    )
    assert wrong == [], "\n".join(wrong)


def test_the_transports_import_each_other_without_cycles() -> None:
    graph = _graph()
    transports = {
        module: {target for target in targets if _within(target, TRANSPORTS)}
        for module, targets in graph.items()
        if _within(module, TRANSPORTS)
    }
    assert len(transports) > 5  # the graph was read
    in_cycles = sorted(module for module in transports if module in _reachable(transports, module))
    assert in_cycles == [], f"in an import cycle: {in_cycles}"


def test_the_layout_checks_see_what_they_look_for() -> None:
    # The import reader resolves relative imports, submodules and deferred imports.
    registry = {(target, name) for target, name, _line in _imports("mcp_django.registry")}
    assert ("mcp_django.handlers", "Tool") in registry
    assert ("mcp_django.views_as_tools", "view_tools") in registry
    assert ("mcp_django.schema", None) in registry  # from . import schema as schemas
    deferred = {target for target, _name, _line in _imports("mcp_django.handlers")}
    assert "mcp_django.asks.context" in deferred
    type_only = {target for target, _name, _line in _imports("mcp_django.protected_resource")}
    assert "mcp_django.registry" not in type_only


# The extensions plugged in on the public points (mcp_django.extensions, MCP_DJANGO["PIPELINE"]):
# no module outside an extension's own package imports it (deferred imports count), so a
# project can leave it out. The edges that stay are where Django looks for an app's parts.
PLUG_INS = ("mcp_django.skills", "mcp_django.tasks", "mcp_django.tracing", "mcp_django.mcp_ui")
BY_DESIGN = {
    # A template tag library is found only in an installed app's templatetags.
    ("mcp_django.templatetags.mcp_ui", "mcp_django.mcp_ui.render"),
    # A model is registered by its app's models module, its table made by the app's migrations:
    # the tasks' table is mcp_django's (docs/extensions.md: why a setting, not an app of its own).
    ("mcp_django.models", "mcp_django.tasks.models"),
    ("mcp_django.migrations.0003_tasks", "mcp_django.tasks.models"),
    # Management commands are found only in an installed app's management/commands: the task
    # workers' and the tasks' operators' commands are mcp_django's.
    ("mcp_django.management.commands.mcp_tasks_purge", "mcp_django.tasks.store"),
    ("mcp_django.management.commands.mcp_worker", "mcp_django.tasks.models"),
    ("mcp_django.management.commands.mcp_worker", "mcp_django.tasks.workers"),
    ("mcp_django.management.commands.mcp_tasks", "mcp_django.tasks.workers"),
}


def test_the_core_imports_no_extension() -> None:
    edges = {
        (module, target)
        for module, targets in _graph().items()
        for target in targets
        for plug_in in PLUG_INS
        if _within(target, plug_in) and not _within(module, plug_in)
    }
    # Within the extensions, one may use another's public module (the task runner's span).
    edges = {(m, t) for m, t in edges if not any(_within(m, p) for p in PLUG_INS)}
    assert BY_DESIGN <= edges, f"gone since: {sorted(BY_DESIGN - edges)}; take them off the list"
    edges -= BY_DESIGN
    assert not any(_within(t, "mcp_django.skills") for _m, t in edges), "skills is a plug-in: import it from nowhere"
    assert not edges, sorted(edges)
