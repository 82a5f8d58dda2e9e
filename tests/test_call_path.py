"""What one call crosses stays within issue 27's bounds (bench/trace_call.py, run as written).

A count of distinct functions and modules, not a timing: a change that puts another module on
every call's path (the audit writer asking its breaker on every batch did) fails here, where the
paired benchmark's noise would hide it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# (functions, modules) at most, on every thread.
BOUNDS = {"plain async tool": (70, 18), "round 1 of an asking tool": (95, 22)}


@pytest.mark.skipif(sys.version_info < (3, 12), reason="threading.setprofile_all_threads is Python 3.12+")
def test_a_call_crosses_no_more_than_its_bounds() -> None:
    # The script's own environment, as `python bench/trace_call.py` has it: not the tests' settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MCP_", "REDIS_", "DATABASE_"))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "trace_call.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = {
        label: (int(functions), int(modules))
        for label, functions, modules in re.findall(r"^(.+?): (\d+) functions in (\d+) modules", done.stdout, re.M)
    }
    assert found.keys() == BOUNDS.keys(), done.stdout
    for label, (functions, modules) in found.items():
        most_functions, most_modules = BOUNDS[label]
        assert functions <= most_functions and modules <= most_modules, (label, functions, modules)
