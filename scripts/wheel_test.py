"""Build the package and follow the README's "Use it in your project" steps.

Builds the sdist and, from it, the wheel (``python -m build``: what a release
would publish), makes a fresh virtualenv in a temporary folder (no checkout on
the path), and runs every step of that README section in order: ``sh`` blocks
line by line, ``python`` blocks written to the file their first line names
(``# PATH: the whole file``, ``# PATH: a new file`` or ``# PATH: add at the
end``). A block of any other shape fails the run, so the README stays a script.
The README's install line runs as written, with ``$MCP_DJANGO_CHECKOUT`` (the
only variable a command may use) naming a copy of this checkout's files (as git
sees them: tracked and new, not ignored), as on a machine that has just cloned
it. The only changes made to the README's commands:

- the install line must install from ``$MCP_DJANGO_CHECKOUT`` (until a release
  is published, the distribution's name finds nothing, or another project);
- ``createsuperuser`` runs with ``--noinput`` (the password from the environment);
- the token ``mcp_token create`` prints is kept, and given to the client in place of ``TOKEN``;
- ``uvicorn`` is started in the background on a free port, which replaces
  ``8000`` in the client's URL.

Then it checks what the README promises: the client was asked and the tool
completed (the user's first name changed in the database), the admin's static
files are served, and ``manage.py check`` is clean. And that an MCP Apps view
(docs/apps.md) is served in that project as in the demo: a template of the
project's app with its static CSS and the ext-apps view script inlined, read by
the test client as a host would read it (``VIEW_*`` below; tests/test_mcp_apps.py
serves the same view from the demo).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST_NAME = "django-mcp-endpoint"
# The README's first command installs from the checkout this names.
CHECKOUT_VARIABLE = "MCP_DJANGO_CHECKOUT"
SECTION = "## Use it in your project"
FILE_HEADER = re.compile(r"# (?P<path>[\w./-]+): (?P<how>the whole file|a new file|add at the end)\b")


# An MCP Apps view in the README's project, and the page it must be, byte for byte.
VIEW_TEMPLATE = (
    '{% load mcp_ui %}<!DOCTYPE html><html><head>{% mcp_app_inline "notes/card.css" %}</head>'
    "<body><main>A note</main>{% mcp_app_script %}</body></html>"
)
VIEW_CSS = "main { font: 14px system-ui; }\n"
VIEW_SCRIPT = ROOT / "mcp_django" / "static" / "mcp_django" / "mcp_ui" / "ext-apps-2.0.4.js"
VIEW_READ = """
from django.test.utils import setup_test_environment
setup_test_environment()  # as a test run: the in-process client's host, testserver, allowed
from django.contrib.auth.models import User
from mcp_django import mcp
from mcp_django.testing import MCPClient
@mcp.tool(app="notes/card.html")
def note_card() -> dict:
    return {"title": "A note"}
page = MCPClient(user=User.objects.get(username="admin"), apps=True).read_view("note_card")
entry = page.contents[0]
assert (entry["uri"], entry["mimeType"]) == ("ui://notes/card.html", "text/html;profile=mcp-app"), entry
assert entry["_meta"] == {"ui": {"csp": {}, "prefersBorder": True}}, entry["_meta"]
open("view.html", "w").write(page.text)
"""


def expected_view() -> str:
    """The page ``VIEW_TEMPLATE`` renders to: its CSS and the view script inlined as they are."""
    return (
        f"<!DOCTYPE html><html><head><style>{VIEW_CSS}</style></head><body><main>A note</main>"
        f"<script>{VIEW_SCRIPT.read_text()}</script></body></html>"
    )


def readme_steps(readme: str) -> list[tuple[str, str]]:
    """("sh", command) and ("file", block) in the README section's order."""
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps: list[tuple[str, str]] = []
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", section, re.S | re.M):
        if lang == "sh":
            for line in body.splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command:
                    steps.append(("sh", command))
        elif lang == "python" and FILE_HEADER.match(body):
            steps.append(("file", body))
        else:
            raise SystemExit(f"README: a ```{lang} block this script cannot apply:\n{body[:200]}")
    return steps


def install_step(steps: list[tuple[str, str]]) -> str:
    """The README's first command, which must install the package from the checkout."""
    first = next((step for kind, step in steps if kind == "sh"), "")
    argv = shlex.split(first)
    if argv[:2] != ["pip", "install"] or f"${CHECKOUT_VARIABLE}" not in argv:
        raise SystemExit(f'README: the first command must be `pip install "${CHECKOUT_VARIABLE}" ...`, not {first!r}')
    return first


def expand(command: str, env: dict[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` from ``env``, as the shell would; an unset one fails the run."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in env:
            raise SystemExit(f"README: ${name} is not set in `{command}`")
        return env[name]

    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", value, command)


def copy_checkout(target: Path, sdist: Path) -> Path:
    """This checkout's files as git sees them (committed, changed or new; not ignored), or,
    outside a git checkout (an unpacked source archive), the sdist's, which hold the same package."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        with tarfile.open(sdist) as archive:
            archive.extractall(target.parent, filter="data")
        (top,) = {name.split("/", 1)[0] for name in tarfile.open(sdist).getnames()}
        return target.parent / top
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet committed is listed too
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, server: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"uvicorn exited with {server.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"uvicorn did not listen on {port}")


class Run:
    def __init__(self, work: Path, checkout: Path) -> None:
        self.work = work
        self.venv = work / "venv"
        self.cwd = work / "site"
        self.cwd.mkdir()
        self.port = free_port()
        self.token: str | None = None
        self.server: subprocess.Popen[bytes] | None = None
        self.server_log = work / "uvicorn.log"
        self.client_output = ""
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
        self.env.update(
            PATH=f"{self.venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            VIRTUAL_ENV=str(self.venv),
            DJANGO_SUPERUSER_PASSWORD="wheel-test-password-0123",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        )
        self.env[CHECKOUT_VARIABLE] = str(checkout)
        for name in ("DATABASE_URL", "REDIS_URL"):
            self.env.pop(name, None)

    def sh(self, command: str) -> str:
        print(f"$ {command}", flush=True)
        argv = shlex.split(expand(command, self.env))
        if argv[0] == "cd":
            self.cwd = self.cwd / argv[1]
            return ""
        if argv[:2] == ["pip", "install"]:
            argv.append("--quiet")
        if "createsuperuser" in argv:
            argv.append("--noinput")
        if argv[0] == "uvicorn":
            with self.server_log.open("wb") as log:
                self.server = subprocess.Popen(
                    [*argv, "--host", "127.0.0.1", "--port", str(self.port)],
                    cwd=self.cwd,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            wait_for(self.port, self.server)
            return ""
        if argv[:2] == ["python", "client.py"]:
            if self.token is None:
                raise SystemExit("the README ran the client before mcp_token create gave a token")
            argv = [a.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}") for a in argv]
            argv = [self.token if a == "TOKEN" else a for a in argv]
        done = subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=300)
        sys.stdout.write(done.stdout)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"failed ({done.returncode}): {command}")
        if argv[2:4] == ["mcp_token", "create"]:
            # The one line it prints; only the token's hash is in the database.
            found = re.fullmatch(r"(mcp_[0-9a-f]+_[\w-]+)\n", done.stdout)
            if found is None:
                raise SystemExit(f"mcp_token create printed no token: {done.stdout!r}")
            self.token = found.group(1)
        if argv[:2] == ["python", "client.py"]:
            self.client_output = done.stdout
        return done.stdout

    def file(self, block: str) -> None:
        header = FILE_HEADER.match(block)
        assert header is not None
        path = self.cwd / header["path"]
        print(f"# {header['how']}: {path.relative_to(self.work)}", flush=True)
        if header["how"] == "add at the end":
            if not path.exists():
                raise SystemExit(f"README adds to {header['path']}, which does not exist")
            path.write_text(path.read_text() + "\n" + block)
        else:
            if header["how"] == "a new file" and path.exists():
                raise SystemExit(f"README makes {header['path']}, which exists already")
            path.write_text(block)

    def stop(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            self.server.wait(10)


def build(work: Path) -> Path:
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], check=True)
    wheels = list(dist.glob("*.whl"))
    sdists = list(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SystemExit(f"expected one wheel and one sdist, got {[p.name for p in dist.iterdir()]}")
    if not wheels[0].name.startswith(DIST_NAME.replace("-", "_") + "-"):
        raise SystemExit(f"the wheel is {wheels[0].name}, not {DIST_NAME}")
    return wheels[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="mcp-wheel-test-"))
    run: Run | None = None
    try:
        steps = readme_steps((ROOT / "README.md").read_text())
        install_step(steps)
        wheel = build(work)
        subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
        run = Run(work, copy_checkout(work / "mcp-django", next((work / "dist").glob("*.tar.gz"))))
        for kind, step in steps:
            run.sh(step) if kind == "sh" else run.file(step)

        # What the README promised.
        if run.server is None or not run.client_output:
            raise SystemExit("the README never started the server or ran the client")
        if "The server asks: Change your first name" not in run.client_output:
            raise SystemExit(f"the client was not asked: {run.client_output!r}")
        if "Your first name is now Ada." not in run.client_output:
            raise SystemExit(f"the tool did not complete: {run.client_output!r}")
        stored = run.sh(
            "python manage.py shell -c "
            + shlex.quote(
                "from django.contrib.auth.models import User; print(User.objects.get(username='admin').first_name)"
            )
        )
        if stored.strip().splitlines()[-1:] != ["Ada"]:
            raise SystemExit(f"the tool's change is not in the database: {stored!r}")
        where = run.sh("python -c " + shlex.quote("import mcp_django; print(mcp_django.__file__)"))
        if not Path(where.strip()).is_relative_to(run.venv):
            raise SystemExit(f"mcp_django was imported from {where.strip()}, not the virtualenv")
        with urllib.request.urlopen(f"http://127.0.0.1:{run.port}/static/admin/css/base.css", timeout=10) as css:
            if css.status != 200:
                raise SystemExit(f"the admin's CSS: {css.status}")
        run.sh("python manage.py check --fail-level WARNING")
        # An MCP Apps view, from the project's app, read in process as a host reads it.
        (run.cwd / "notes" / "templates" / "notes").mkdir(parents=True)
        (run.cwd / "notes" / "templates" / "notes" / "card.html").write_text(VIEW_TEMPLATE)
        (run.cwd / "notes" / "static" / "notes").mkdir(parents=True)
        (run.cwd / "notes" / "static" / "notes" / "card.css").write_text(VIEW_CSS)
        run.sh("python manage.py shell -c " + shlex.quote(VIEW_READ))
        if (run.cwd / "view.html").read_text() != expected_view():
            raise SystemExit("the MCP Apps view is not the page the demo serves (site/view.html)")
        server_log = run.server_log.read_text(errors="replace")
        sys.stdout.write(server_log)
        if "Application startup complete." not in server_log or "lifespan" in server_log.lower():
            raise SystemExit("uvicorn's startup went wrong, or the application does not speak lifespan (log above)")
        print(f"wheel test passed in {time.time() - started:.0f} s ({wheel.name} built; installed from the checkout)")
        return 0
    finally:
        if run is not None:
            run.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    sys.exit(main())
