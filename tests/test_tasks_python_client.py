"""docs/tasks.md's "Drive a task from Python", verbatim: the official SDK (``mcp`` 2.x) with
the client extension the page shows runs the demo's ``sales_report`` as a task, answers its
question through the client's elicitation callback, and prints the tool's result."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from mcp_django.models import AuditEvent, Kind
from tests.conftest import mcp_settings
from tests.task_worker import task_worker

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db(transaction=True)


def snippet() -> str:
    page = (ROOT / "docs" / "tasks.md").read_text()
    section = page.split("## Drive a task from Python", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None
    return found.group(1)


def test_the_python_snippet_drives_a_task_with_a_question_to_its_result(live_url: str, tmp_path: Path) -> None:
    from project.demo import mcp as demo

    token = Token.objects.create(user=get_user_model().objects.create_user("alice")).key
    script = tmp_path / "drive_a_task.py"
    script.write_text(snippet())
    with (
        mcp_settings(ALLOW_ANONYMOUS=False, TASK_POLL_INTERVAL_MS=100),
        mock.patch.object(demo, "REPORT_STEP_SECONDS", 0.1),
        task_worker(),
    ):
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "MCP_URL": live_url, "MCP_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "asked: Include refunds in the Q3 report?",
        "Sales report for Q3: 1,204 orders, with refunds.",
    ]
    kinds = list(AuditEvent.objects.filter(target="sales_report").order_by("id").values_list("kind", flat=True))
    assert kinds == [Kind.TASK_CREATED, Kind.TASK_INPUT_REQUIRED, Kind.TASK_COMPLETED]
