"""Every bench entry point runs as docs/performance.md and the Makefile write it, from the root."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The documented way in: what a reader copies (docs/performance.md) and what make runs.
DOCUMENTED = sorted(
    set(
        re.findall(
            r"\bbench/(\w+)\.py", (ROOT / "docs" / "performance.md").read_text() + (ROOT / "Makefile").read_text()
        )
    )
)


def clean_env() -> dict[str, str]:
    """A shell's environment, not the test run's (no test settings, database or Redis)."""
    drop = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "PYTHONPATH", "MCP_REQUEST_STATE_KEY")
    return {k: v for k, v in os.environ.items() if k not in drop}


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=300
    )


def test_the_documented_entry_points_are_all_here() -> None:
    assert {"run", "instructions", "profile_call", "sdk_server"} <= set(DOCUMENTED)
    assert set(DOCUMENTED) <= {p.stem for p in (ROOT / "bench").glob("*.py")}


@pytest.mark.parametrize("name", [n for n in DOCUMENTED if n != "sdk_server"])
def test_each_script_starts(name: str) -> None:
    done = run(f"bench/{name}.py", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:") and f"{name}.py" in done.stdout


def test_the_sdk_server_loads_as_bench_run_serves_it() -> None:
    # bench/run.py starts `uvicorn bench.sdk_server:app` from the root.
    done = run(
        "-c",
        "from uvicorn.importer import import_from_string; print(type(import_from_string('bench.sdk_server:app')).__name__)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_the_profiler_profiles_a_few_calls() -> None:
    done = run("bench/profile_call.py", "5", "--token")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\d+ µs per call \(wall, in-process\)$", done.stdout, re.M), done.stdout
    assert "Ordered by: cumulative time" in done.stdout
