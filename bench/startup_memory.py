"""What the demo holds once started, step by step and module by module (VmRSS, in MiB).

Imports what uvicorn and Django import to serve the demo, with the bench's environment
(bench/run.py), in one process, and reads ``/proc/self/status``'s VmRSS after each step. Each
module named with ``--module`` is timed by its own loader: the RSS its code (its imports
included) adds where the start-up imports it; what an earlier module imported is not counted
again, so the numbers depend on the order and do not add up to more than the step they are in.

    python bench/startup_memory.py [--module NAME ...]

Linux only (it reads /proc). Load on the machine does not move the numbers; a change of the
installed packages does.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
MODULES = (
    "oauth2_provider.models",
    "jwcrypto.jwk",
    "oauthlib.oauth2.rfc6749",
    "django.contrib.auth.models",
    "jsonschema_rs",
    "project.conformance.mcp",
    "mcp_django.routing",
    "opentelemetry.propagate",
)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Measured(importlib.abc.Loader):
    """A module's own loader, with the RSS before and after its code runs."""

    def __init__(self, name: str, loader: importlib.abc.Loader, found: list[tuple[str, float]]) -> None:
        self.name, self.loader, self.found = name, loader, found

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        before = rss_mib()
        try:
            self.loader.exec_module(module)
        finally:
            self.found.append((self.name, rss_mib() - before))


class Finder(importlib.abc.MetaPathFinder):
    def __init__(self, names: Sequence[str]) -> None:
        self.names = set(names)
        self.found: list[tuple[str, float]] = []

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in self.names:
            return None
        sys.meta_path.remove(self)  # the spec every other finder would give
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is not None and spec.loader is not None:
            spec.loader = Measured(name, spec.loader, self.found)
        return spec


def measure(modules: Sequence[str]) -> None:
    finder = Finder(modules)
    sys.meta_path.insert(0, finder)
    steps = [("the interpreter (and this script)", rss_mib())]
    import asyncio  # noqa: F401

    import uvicorn.main
    import uvicorn.protocols.http.httptools_impl  # noqa: F401
    import uvloop  # noqa: F401

    steps.append(("uvicorn, uvloop, httptools", rss_mib()))
    import django
    from django.conf import settings

    settings.INSTALLED_APPS  # noqa: B018 - reads the settings module
    steps.append(("the settings", rss_mib()))
    import django.core.handlers.asgi
    import django.db.models
    import django.http
    import django.urls

    steps.append(("Django's request and ORM modules", rss_mib()))
    django.setup(set_prefix=False)
    steps.append(("django.setup(): the apps' models, ready(), the registries", rss_mib()))
    import project.asgi  # noqa: F401

    steps.append(("project.asgi (routing, middleware, the URLconf)", rss_mib()))
    previous = 0.0
    for label, value in steps:
        print(f"{label:<60} {value - previous:+6.1f} {value:6.1f}")
        previous = value
    print()
    for name, added in finder.found:
        print(f"{name:<60} {added:+6.1f}")
    missing = set(modules) - {name for name, _ in finder.found}
    for name in sorted(missing):
        print(f"{name:<60} not run by the start-up (deferred, or imported before this script)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", action="append", help=f"a module to measure (default: {', '.join(MODULES)})")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    modules = args.module or list(MODULES)
    if args.child:
        measure(modules)
        return 0
    with tempfile.TemporaryDirectory(prefix="mcp-startup-") as work:
        env = {
            **os.environ,
            # The bench's (bench/run.py main()).
            "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
            "DJANGO_DEBUG": "0",
            "DATABASE_URL": f"sqlite:///{Path(work) / 'db.sqlite3'}",
            "MCP_REQUEST_STATE_KEY": "bench-request-state-key-0123456789abcdefghij",
            "MCP_ALLOW_ANONYMOUS": "1",
            "PYTHONPATH": str(ROOT),
        }
        env.pop("REDIS_URL", None)
        # A fresh interpreter: this script's own imports (argparse, subprocess) are not counted.
        child = [
            sys.executable,
            "-c",
            "import sys; sys.argv[0] = 'startup_memory'; import bench.startup_memory as m; m.main()",
        ]
        command = [*child, "--child", *[f"--module={name}" for name in modules]]
        return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
