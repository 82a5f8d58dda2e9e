"""Every bench entry point runs as docs/performance.md and the Makefile write it, from the root."""

from __future__ import annotations

import json
import os
import re
import shutil
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


def run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )


def test_the_documented_entry_points_are_all_here() -> None:
    assert {"run", "instructions", "profile_call", "sdk_server"} <= set(DOCUMENTED)
    assert set(DOCUMENTED) <= {p.stem for p in (ROOT / "bench").glob("*.py")}


@pytest.mark.parametrize("name", [n for n in DOCUMENTED if n != "sdk_server"])
def test_each_script_starts(name: str) -> None:
    done = run(f"bench/{name}.py", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:") and f"{name}.py" in done.stdout


# What a call crosses, at most (functions, modules of mcp_django/ on every thread): issue 27's bounds.
CROSSING_BOUNDS = {"plain async tool": (70, 18), "round 1 of an asking tool": (95, 22)}


@pytest.mark.skipif(sys.version_info < (3, 12), reason="threading.setprofile_all_threads is Python 3.12+")
def test_a_call_crosses_no_more_than_its_bounds() -> None:
    """bench/trace_call.py as written, its counts held to the bounds: a count, not a timing, so a
    change that puts another module on every call's path fails here, where the benchmark's noise
    would hide it (the audit writer asking its breaker on every batch did)."""
    done = run("bench/trace_call.py", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = {
        label: (int(functions), int(modules))
        for label, functions, modules in re.findall(r"^(.+?): (\d+) functions in (\d+) modules", done.stdout, re.M)
    }
    assert found.keys() == CROSSING_BOUNDS.keys(), done.stdout
    for label, (functions, modules) in found.items():
        most_functions, most_modules = CROSSING_BOUNDS[label]
        assert functions <= most_functions and modules <= most_modules, (label, functions, modules)


def test_the_line_count_tells_each_kind_of_line_apart() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from count_lines import kinds
    finally:
        sys.path.remove(str(ROOT / "bench"))
    source = 'def f():\n    """One.\n\n    Two."""\n\n    # why\n    x = """not a\n    docstring"""  # trailing\n    return x\n'
    assert kinds(source) == {"doc": 3, "blank": 1, "comment": 1, "code": 4}


def test_the_line_count_counts_the_work_tree_and_a_revision() -> None:
    done = run("bench/count_lines.py", "--by-file")
    assert done.returncode == 0, done.stderr
    *files, total = done.stdout.splitlines()
    counted = {line.split()[1]: int(line.split()[0]) for line in files}
    assert "mcp_django/pipeline.py" in counted and not any("migrations" in path for path in counted)
    lines = sum(len((ROOT / path).read_text().splitlines()) for path in counted)
    assert total.startswith(f"{lines} lines in {len(counted)} modules: code ")
    if (ROOT / ".git").exists():
        at_head = run("bench/count_lines.py", "--rev", "HEAD")
        assert at_head.returncode == 0 and at_head.stdout.split()[0].isdigit(), at_head.stderr


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


def test_the_profiler_replays_the_flow() -> None:
    """``--flow``: the three requests of the 3-request flow in turn (each checked free of errors by
    the script), so the rounds' own costs (sealing, verifying, the replay) show in the profile."""
    env = {**clean_env(), "ROWS": "400"}
    done = subprocess.run(
        [sys.executable, "bench/profile_call.py", "6", "--flow"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\d+ µs per request \(wall, in-process\)$", done.stdout, re.M), done.stdout
    # Both ends of a round were profiled: a state verified and a new one sealed.
    assert "(unseal)" in done.stdout and "(seal)" in done.stdout, done.stdout[-3000:]


def test_the_profiler_measures_cpu_by_thread() -> None:
    """``--cpu``: no profiler; each thread's CPU per request and the collector's passes."""
    done = run("bench/profile_call.py", "6", "--flow", "--cpu")
    assert done.returncode == 0, done.stderr
    found = re.search(
        r"^CPU per request: event loop [\d.]+ µs, other threads [\d.]+ µs; the collector: \d+ passes, [\d.]+ µs per request$",
        done.stdout,
        re.M,
    )
    assert found, done.stdout
    assert "Ordered by" not in done.stdout


def test_the_profiler_takes_one_mode() -> None:
    done = run("bench/profile_call.py", "5", "--flow", "--async")
    assert done.returncode == 2 and "not allowed with argument" in done.stderr
    done = run("bench/profile_call.py", "5", "--flow", "--token")
    assert done.returncode == 2 and "takes no --token" in done.stderr


def test_the_profiler_profiles_the_async_tool() -> None:
    """``--async``: the demo's async tool, whose function runs on the profiled event loop
    (the sync echo runs in a worker thread, which cProfile does not see)."""
    done = subprocess.run(
        [sys.executable, "bench/profile_call.py", "5", "--async"],
        cwd=ROOT,
        env={**clean_env(), "ROWS": "1000"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\d+ µs per call \(wall, in-process\)$", done.stdout, re.M), done.stdout
    assert re.search(r"demo/mcp\.py:\d+\(reverse\)", done.stdout), done.stdout


def _needs(tool: str) -> None:
    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is not installed (make bench-deps)")
        pytest.skip(f"{tool} is not installed (make bench-deps)")


def test_the_benchmark_runs_for_a_second(tmp_path: Path) -> None:
    """`make bench`'s script, one second a scenario, twice: the token call and the flow (its three
    requests captured from both servers) against the SDK's server, each run paired with its
    baseline's; both tables' rows, the pairs' ratios and the results' file."""
    _needs("wrk")
    # 32 s of load; the rest (migrations, two servers' start-up) is slow only on a loaded machine.
    args = ("--seconds", "1", "--repeat", "2", "--out", str(tmp_path), "token", "flow")
    done = run("bench/run.py", *args, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = re.findall(
        r"^(echo, anonymous|echo, token auth|3-request flow) +(sdk|mcp-django) +([18]) +(\d+) +([\d.]+)x",
        done.stdout,
        re.M,
    )
    assert {(label, server, conns) for label, server, conns, _, _ in rows} == {
        (label, server, conns)
        for label, server in [
            ("echo, anonymous", "sdk"),
            ("echo, token auth", "mcp-django"),
            ("3-request flow", "sdk"),
            ("3-request flow", "mcp-django"),
        ]
        for conns in ("1", "8")
    }, done.stdout
    assert all(int(rps) > 0 for *_, rps, _ in rows)
    assert not re.search(r"^async tool", done.stdout, re.M)  # not asked for
    (saved,) = tmp_path.glob("bench-*.json")
    results = json.loads(saved.read_text())
    for key in ("echo, token auth|mcp-django|1", "3-request flow|mcp-django|8"):
        row = results[key]
        # The median of two pairs' ratios lies between them, and the table prints it and their range.
        assert 0 < row["ratio_min"] <= row["ratio"] <= row["ratio_max"], row
        label, _, conns = key.split("|")
        line = re.search(rf"^{label} +mcp-django +{conns} .*$", done.stdout, re.M)
        assert line and f"{row['ratio']:.2f}x" in line[0], done.stdout
        assert f"{row['ratio_min']:.2f}-{row['ratio_max']:.2f}" in line[0], done.stdout
    assert "ratio" not in results["3-request flow|sdk|8"]


def test_the_benchmark_refuses_an_unknown_scenario() -> None:
    done = run("bench/run.py", "echo", "flood")
    assert done.returncode == 2 and "unknown scenario(s): flood" in done.stderr


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of bench/instructions.py's children: the demo on a migrated SQLite file."""
    database = tmp_path_factory.mktemp("instructions") / "db.sqlite3"
    env = {**clean_env(), "DATABASE_URL": f"sqlite:///{database}"}
    env.update(DJANGO_SETTINGS_MODULE="project.conformance.settings", DJANGO_DEBUG="0")
    migrate = [sys.executable, "manage.py", "migrate", "-v0", "--skip-checks"]
    subprocess.run(migrate, cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
    return env


@pytest.mark.parametrize("scenario", ["echo", "token", "async", "flow", "taskget"])
def test_each_instruction_count_scenario_runs_its_calls(scenario: str, demo_env: dict[str, str]) -> None:
    """What `make bench-instructions` runs under valgrind, for each scenario, without valgrind (under
    it the demo's start-up alone costs about a minute of CPU): a few calls after a few of warm-up,
    from the root, each answered without an error."""
    done = subprocess.run(
        [sys.executable, "bench/instructions.py", "--child", scenario, "3", "2"],
        cwd=ROOT,
        env=demo_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_instruction_count_refuses_an_unknown_scenario() -> None:
    done = run("bench/instructions.py", "echo", "flood")
    assert done.returncode == 2 and "unknown scenario(s): flood" in done.stderr


def test_startup_memory_measures_the_started_demo() -> None:
    done = run("bench/startup_memory.py", "--module=oauth2_provider.models", "--module=jsonschema_rs")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = [line for line in lines if line.startswith(("the interpreter", "django.setup()", "project.asgi"))]
    assert len(steps) == 3
    total = float(steps[-1].split()[-1])
    assert 20 < total < 500  # MiB: read from /proc, not made up
    measured = next(line for line in lines if line.startswith("oauth2_provider.models"))
    assert float(measured.split()[-1]) > 0
    # Imported by the first call with a dict schema, not by the start-up (tests/test_lazy_start.py).
    assert any(line.startswith("jsonschema_rs") and "not run by the start-up" in line for line in lines)
