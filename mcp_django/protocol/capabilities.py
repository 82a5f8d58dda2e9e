"""What this server says about itself: its name and version, and its capabilities by protocol era."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..conf import mcp_settings
from ..skills import methods as skills
from .revisions import Era


def server_info() -> dict[str, Any]:
    info: dict[str, Any] = {"name": mcp_settings.SERVER_NAME, "version": __version__}
    if mcp_settings.SERVER_TITLE:
        info["title"] = mcp_settings.SERVER_TITLE
    return info


def server_capabilities(era: Era) -> dict[str, Any]:
    caps: dict[str, Any] = {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        # Both eras: resources/subscribe (legacy) and resourceSubscriptions (subscriptions/listen).
        "resources": {"subscribe": True, "listChanged": True},
        "completions": {},
    }
    if era == Era.LEGACY:
        caps["logging"] = {}
    extensions = skills.extensions()
    if extensions:
        caps["extensions"] = extensions
    return caps
