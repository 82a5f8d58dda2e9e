"""The test client plugs into the serving code through seams any harness may use: no
module outside it (``mcp_django/inprocess``, ``mcp_django/testing.py``) knows it exists."""

from __future__ import annotations

import ast
from pathlib import Path

import mcp_django

PACKAGE = Path(mcp_django.__file__).parent
CLIENT = "mcp_django.inprocess"
# The test client itself: its machinery, and the public module that re-exports it.
ALLOWED = ("mcp_django/inprocess/", "mcp_django/testing.py")


def _module_of(path: Path) -> tuple[list[str], bool]:
    parts = ["mcp_django", *path.relative_to(PACKAGE).with_suffix("").parts]
    if parts[-1] == "__init__":
        return parts[:-1], True
    return parts, False


def _client_imports(path: Path, source: str | None = None) -> list[str]:
    """Each import of the client's package in ``path`` (TYPE_CHECKING and deferred ones too),
    and each string naming it (an ``import_module``, a dotted path in a setting)."""
    parts, is_package = _module_of(path)
    found = []
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = parts if is_package else parts[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, *([node.module] if node.module else [])])
            # ``from mcp_django import inprocess`` names the package as the imported name.
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        for name in names:
            if name == CLIENT or name.startswith(CLIENT + "."):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}")
                break
    return found


def _serving_modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE.parent)).replace("\\", "/").startswith(ALLOWED)
    ]


def test_no_module_outside_the_test_client_imports_it() -> None:
    found = [line for path in _serving_modules() for line in _client_imports(path)]
    assert not found, "the serving code must not know the test client exists:\n" + "\n".join(found)


def test_the_scan_sees_each_way_of_naming_the_client() -> None:
    """The scan is not blind: every spelling of an import of the client is caught."""
    spellings = [
        "from .inprocess import threads",
        "from . import inprocess",
        "from .inprocess.client import MCPClient",
        "import mcp_django.inprocess.answers",
        "from mcp_django import inprocess",
        "def f():\n    from .inprocess import threads",
        "if TYPE_CHECKING:\n    from .inprocess.client import MCPClient",
        "importlib.import_module('mcp_django.inprocess.threads')",
    ]
    # Read as if they were modules of the package (nothing is written there).
    module = PACKAGE / "probe.py"
    for source in spellings:
        assert _client_imports(module, source), source
    assert _client_imports(PACKAGE / "asks" / "probe.py", "from ..inprocess import threads")
    assert not _client_imports(PACKAGE / "asks" / "probe.py", "from .inprocess import threads")  # asks.inprocess
    assert not _client_imports(module, "from .lifecycle import host_thread\nfrom . import signals")
    assert PACKAGE / "lifecycle.py" in _serving_modules()
    assert not any("inprocess" in str(path) for path in _serving_modules())
