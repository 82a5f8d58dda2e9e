"""Scope step-up with the newest 1.x Python SDK (`mcp==1.30.0`), which asks for exactly the scopes
a 403 ``insufficient_scope`` names: the challenge must name all the call needs, the endpoint's
``REQUIRED_SCOPES`` too, or the client trades ``mcp`` for ``shop`` and is refused for good.

The SDK runs in a virtualenv of its own (``make legacy-python-client``; built here when missing).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client as DjangoClient
from oauth2_provider.models import AccessToken

from tests.conftest import mcp_settings
from tests.oauth_consent import approve
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

VENV = ROOT / ".venv-mcp1"
CLIENT = ROOT / "tests" / "clients" / "mcp1_step_up.py"


def _mcp1_python() -> Path:
    python = VENV / "bin" / "python"
    if not (VENV / ".installed").exists() and shutil.which("make"):
        subprocess.run(["make", "legacy-python-client"], cwd=ROOT, capture_output=True, timeout=600)
    if not (VENV / ".installed").exists():
        if os.environ.get("CI"):
            pytest.fail("the mcp 1.x virtualenv could not be built (make legacy-python-client)")
        pytest.skip("the mcp 1.x virtualenv could not be built (make legacy-python-client; needs the package index)")
    return python


def _drive(python: Path, url: str, session_cookie: str) -> tuple[dict[str, Any], list[dict[str, list[str]]]]:
    """Run the 1.x client; approve each consent it asks for as the signed-in person."""
    from urllib.parse import parse_qs, urlsplit

    child = subprocess.Popen(
        [str(python), str(CLIENT), url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in child.stdout], daemon=True).start()  # type: ignore[union-attr]
    consents: list[dict[str, list[str]]] = []
    try:
        while True:
            try:
                message = json.loads(lines.get(timeout=120))
            except queue.Empty:
                raise AssertionError("the mcp 1.x client did not finish") from None
            if "authorize" in message:
                consents.append(parse_qs(urlsplit(message["authorize"]).query))
                assert len(consents) <= 3, consents  # a client refused for good asks again and again
                assert child.stdin is not None
                child.stdin.write(approve(message["authorize"], session_cookie) + "\n")
                child.stdin.flush()
            elif "failed" in message:
                child.wait(30)
                raise AssertionError(f"{message['failed']}\n{child.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            else:
                return message["done"], consents
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(30)


def test_the_mcp_1x_client_steps_up_for_a_handlers_scope(live_url: str) -> None:
    python = _mcp1_python()
    user = get_user_model().objects.create_user("ora", password="pw")
    browser = DjangoClient()
    browser.force_login(user)
    with mcp_settings(ALLOW_ANONYMOUS=False):
        outcome, consents = _drive(python, live_url, browser.cookies["sessionid"].value)
    assert outcome["whoami"]["username"] == "ora"
    assert outcome["orders_is_error"] is False, outcome
    # The first consent asks for the endpoint's scope; the step-up for it and the handler's.
    assert [c["scope"][0].split() for c in consents] == [["mcp"], ["mcp", "shop"]]
    assert all(c["resource"] == [live_url] for c in consents)
    assert set(outcome["scope"].split()) == {"mcp", "shop"}
    # Stored hashed (the demo's RFC 9700 settings): found by checksum, as the toolkit finds it.
    token = AccessToken.objects.get(token_checksum=hashlib.sha256(outcome["access_token"].encode()).hexdigest())
    assert token.token == ""
    assert token.user == user and token.resource == [live_url]
