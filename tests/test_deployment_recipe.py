"""docs/deployment.md's instance recipe, run as a shell script in a copy of the project (issue 29).

The page's first ``sh`` block, line by line in ``bash -euo pipefail``, up to ``migrate``: the
install line is checked (its extras exist and are installed here) rather than run, and
``DATABASE_URL`` names a SQLite file of the run's own (``db.internal`` does not exist here).
Its ``mcp_generate_key`` must run before the key exists, the key must come out non-empty, and
``manage.py check --deploy --fail-level WARNING`` must pass with the documented variables. A
key exported empty (a command that failed) stops the recipe at ``check`` (``mcp_django.E017``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "deployment.md"


def recipe() -> list[str]:
    """The first ``sh`` block of "## The instances", its comments dropped."""
    section = DOC.read_text().split("## The instances", 1)[1]
    found = re.search(r"^```sh\n(.*?)^```", section, re.S | re.M)
    assert found, "docs/deployment.md: no sh block under 'The instances'"
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in found.group(1).splitlines()]
    return [line for line in lines if line]


def _project(tmp: Path) -> Path:
    """A copy of the demo project (its manage.py and settings), mcp_django from this checkout."""
    folder = tmp / "site"
    folder.mkdir()
    shutil.copy(ROOT / "manage.py", folder)
    shutil.copytree(ROOT / "project", folder / "project", ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3"))
    return folder


def _script(lines: list[str], database: str) -> str:
    rest = lines[1:]  # the install line: test_the_install_line_names_extras_that_exist
    until = next(i for i, line in enumerate(rest) if "manage.py migrate" in line)
    steps = [line.replace("python ", '"$PYTHON" ', 1) if line.startswith("python ") else line for line in rest]
    steps = [re.sub(r"\$\(python ", '$("$PYTHON" ', line) for line in steps[: until + 1]]
    steps = [re.sub(r"^export DATABASE_URL=\S+", f"export DATABASE_URL={shlex.quote(database)}", s) for s in steps]
    return "\n".join(["set -euo pipefail", *steps, 'printf "%s" "$MCP_REQUEST_STATE_KEY" > key.txt'])


def _run(folder: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "DJANGO_", "DATABASE_", "REDIS_"))}
    env.update(PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    env.pop("ALLOWED_HOSTS", None)
    return subprocess.run(
        ["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_install_line_names_extras_that_exist() -> None:
    install = recipe()[0]
    argv = shlex.split(install)
    assert argv[:2] == ["pip", "install"] and argv[2] == "$MCP_DJANGO_CHECKOUT[redis,postgresql]", install
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "channels-redis" in extras["redis"][0] and "psycopg[binary,pool]" in extras["postgresql"][0]
    for module in ("channels_redis", "psycopg", "psycopg_pool"):
        assert find_spec(module) is not None, module


def test_the_recipe_runs_and_passes_check_deploy(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    done = _run(folder, _script(recipe(), f"sqlite:///{tmp_path / 'db.sqlite3'}"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout + done.stderr, done.stdout + done.stderr
    key = (folder / "key.txt").read_text()
    assert len(key.encode()) >= 32, key
    # The settings the page shows read the variable as the demo does: mcp_generate_key runs without it.
    assert 'os.environ.get("MCP_REQUEST_STATE_KEY")' in DOC.read_text()
    assert '"REQUEST_STATE_KEY": os.environ.get("MCP_REQUEST_STATE_KEY"),' in (ROOT / "project/settings.py").read_text()


def test_a_key_exported_empty_stops_the_recipe(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    script = _script(recipe(), f"sqlite:///{tmp_path / 'db.sqlite3'}")
    # The key's command fails: `export KEY=$(...)` exports it empty and goes on.
    broken = re.sub(r"\$\(\"\$PYTHON\" manage\.py mcp_generate_key\)", "$(false)", script)
    assert broken != script
    done = _run(folder, broken)
    assert done.returncode != 0
    assert "mcp_django.E017" in done.stderr and "key is empty" in done.stderr, done.stderr
    assert not (folder / "key.txt").exists()  # stopped at check, before migrate
