"""What the multi-process tests start: the demo under uvicorn, on free loopback ports."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(address: tuple[str, int]) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(address) == 0


def wait_listening(address: tuple[str, int], what: str, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while not listening(address):
        if time.time() > deadline:
            raise RuntimeError(f"{what} is not listening on {address}")
        time.sleep(0.1)


def serve_demo(
    port: int, env: dict[str, str], log: IO[bytes] | None = None, args: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """uvicorn serving ``project.asgi`` on 127.0.0.1:``port`` (with uvicorn's ``args``), returned
    once it listens; its output goes to ``log`` (nowhere without one)."""
    server = spawn_demo(port, env, log, args)
    wait_listening(("127.0.0.1", port), "uvicorn")
    return server


def spawn_demo(
    port: int, env: dict[str, str], log: IO[bytes] | None = None, args: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """``serve_demo`` without the wait: several instances import the demo (a second or more
    each) side by side, then the caller waits for each to listen."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "project.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *args,
        ],
        cwd=ROOT,
        env=env,
        stdout=log if log is not None else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
    )


class ThreadedUvicorn:
    """uvicorn serving an ASGI app in a thread of this process (its settings, its caches):
    ``with ThreadedUvicorn(app) as server: ... server.port``."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Any:
        self.thread.start()
        deadline = time.time() + 15
        while not self.server.started:
            assert time.time() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)
