"""The public API is what docs/api.md lists, and the docs and the README use nothing else."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
API = (ROOT / "docs" / "api.md").read_text()
# Every page a reader follows, but this list itself (which names what is internal).
PAGES = sorted([ROOT / "README.md", *(p for p in (ROOT / "docs").glob("*.md") if p.name != "api.md")])

PUBLIC_MODULES = re.findall(r"^\| `(mcp_django(?:\.\w+)*)` \|", API, re.M)
DOTTED_PATHS = set(
    re.findall(r"`(mcp_django(?:\.\w+)+)`", API.split("## Dotted paths settings name")[1].split("##")[0])
)


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _resolve(dotted: str) -> tuple[str, str | None] | None:
    """(module, name) for ``dotted``: its longest importable prefix and the attribute after it
    (None: the module itself); None when it names nothing (a logger, a span attribute)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module(".".join(parts[:cut]))
        if module is None:
            continue
        rest = parts[cut:]
        if not rest:
            return module.__name__, None
        if len(rest) == 1 and hasattr(module, rest[0]):
            return module.__name__, rest[0]
        return None
    return None


def _is_public(dotted: str) -> bool:
    found = _resolve(dotted)
    if found is None or dotted in DOTTED_PATHS:
        return True
    module, name = found
    if module not in PUBLIC_MODULES:
        return False
    return name is None or name in importlib.import_module(module).__all__


def test_the_list_names_modules_that_exist() -> None:
    assert "mcp_django" in PUBLIC_MODULES and "mcp_django.testing" in PUBLIC_MODULES
    for dotted in DOTTED_PATHS:
        assert _resolve(dotted) is not None, dotted


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_each_public_module_says_what_is_public(name: str) -> None:
    module = importlib.import_module(name)
    public = module.__dict__.get("__all__")
    assert public, f"{name} has no __all__"
    for attribute in public:
        assert getattr(module, attribute) is not None, (name, attribute)


def _imports(text: str) -> list[str]:
    """Every ``mcp_django`` name the text's code imports, as a dotted path."""
    found = []
    for module, names in re.findall(r"from (mcp_django(?:\.\w+)*) import \(?([\w, \n]+)\)?", text):
        found += [f"{module}.{name.strip()}" for name in names.split(",") if name.strip()]
    found += re.findall(r"^\s*import (mcp_django(?:\.\w+)*)", text, re.M)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_docs_use_only_public_names(page: Path) -> None:
    text = page.read_text()
    named = _imports(text) + re.findall(r"`(mcp_django(?:\.\w+)+)`", text)
    internal = sorted({dotted for dotted in named if not _is_public(dotted)})
    assert not internal, f"{page.name} names internal names: {internal}"


def test_the_check_sees_internal_names() -> None:
    """Not blind: an internal module's name, and a public module's name outside its __all__."""
    assert _imports("from mcp_django.routing import lifespan, mcp_urlpatterns  # noqa") == [
        "mcp_django.routing.lifespan",
        "mcp_django.routing.mcp_urlpatterns",
    ]
    assert not _is_public("mcp_django.transports.asgi.freeze_startup_objects")
    assert not _is_public("mcp_django.lifecycle.host_thread")
    assert not _is_public("mcp_django.audit.writer")
    assert _is_public("mcp_django.routing.freeze_startup_objects")
    assert _is_public("mcp_django.round")  # a span attribute's name, not a Python name


def test_the_classifiers_name_every_django_and_python_the_ranges_allow() -> None:
    """Each Django feature release the dependency range allows (Django numbers them X.0, X.1,
    X.2), and each Python from ``requires-python`` to the newest CI runs, has its classifier."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    classifiers = set(project["classifiers"])
    django = next(d for d in project["dependencies"] if d.startswith("Django"))
    bounds = re.fullmatch(r"Django>=(\d+)\.(\d+),<(\d+)\.(\d+)", django)
    assert bounds is not None, django
    low, high = tuple(map(int, bounds.group(1, 2))), tuple(map(int, bounds.group(3, 4)))
    allowed = [(m, n) for m in range(low[0], high[0] + 1) for n in range(3) if low <= (m, n) < high]
    assert allowed == [(5, 2), (6, 0), (6, 1)]  # today's range: a new one needs its classifier too
    for major, minor in allowed:
        assert f"Framework :: Django :: {major}.{minor}" in classifiers
    oldest = re.fullmatch(r">=3\.(\d+)", project["requires-python"])
    assert oldest is not None
    for minor in range(int(oldest.group(1)), 14):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert "Typing :: Typed" in classifiers and project["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
