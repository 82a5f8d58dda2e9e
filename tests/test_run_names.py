"""tests/run_names.py under pytest-xdist: each worker is a run of its own, and so are the processes it starts."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.processes import ROOT


def _run_id(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("MCP_TEST_RUN_ID", "PYTEST_XDIST_WORKER")}
    out = subprocess.run(
        [sys.executable, "-c", "from tests import run_names; print(run_names.RUN_ID, run_names.database_name('x'))"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    run_id, database = out
    assert database == f"mcp_x_{run_id}"
    return run_id


def test_a_worker_suffixes_the_run_it_inherits_and_its_processes_keep_the_suffix() -> None:
    # The controller's id, inherited by two workers: each gets names of its own.
    assert _run_id(MCP_TEST_RUN_ID="7_ab", PYTEST_XDIST_WORKER="gw0") == "7_ab_gw0"
    assert _run_id(MCP_TEST_RUN_ID="7_ab", PYTEST_XDIST_WORKER="gw1") == "7_ab_gw1"
    # A server the worker starts inherits both variables, and stays in the worker's run.
    assert _run_id(MCP_TEST_RUN_ID="7_ab_gw1", PYTEST_XDIST_WORKER="gw1") == "7_ab_gw1"
    # Without xdist the id is the run's, unchanged.
    assert _run_id(MCP_TEST_RUN_ID="7_ab") == "7_ab"


def test_a_run_without_an_id_makes_one_per_process() -> None:
    assert _run_id() != _run_id()
