"""The skills extension's system checks (the ids are listed in :mod:`mcp_django.checks`),
registered when the extension is (:func:`mcp_django.skills.methods.register`)."""

from __future__ import annotations

from typing import Any

from django.core.checks import register

from ..conf import mcp_settings
from .library import scan


@register()
def check_skills(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """What a scan of the skill folders left out or warns about (mcp_django.skills.*)."""
    if "mcp_django.skills.methods" not in mcp_settings.EXTENSIONS or "SKILLS_DIRS" in dict(mcp_settings.problems()):
        return []  # not served; or check_settings reports it
    return scan().problems
