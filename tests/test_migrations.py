"""The committed migrations (mcp_django's and the demo's) are the models: a model change without its migration fails here
(as `manage.py makemigrations --check` would), on whichever database the leg runs."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_lacks_its_migration() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as stopped:
        pytest.fail(
            f"makemigrations --check found changes without a migration (exit {stopped.code}):\n{out.getvalue()}"
        )
