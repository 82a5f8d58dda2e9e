"""What this server says about itself: its name and version, and its capabilities by protocol era."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..conf import mcp_settings
from ..icons import IconBase, revision_has_icons
from ..skills import methods as skills
from ..tasks import EXTENSION as TASKS_EXTENSION
from .revisions import Era


def server_info(version: str | None = None, icons: IconBase | None = None) -> dict[str, Any]:
    """The server's Implementation; at ``version`` 2025-11-25 or later, with its description,
    website and icons (the handshake and server/discover; other results carry the short form)."""
    info: dict[str, Any] = {"name": mcp_settings.SERVER_NAME, "version": __version__}
    if mcp_settings.SERVER_TITLE:
        info["title"] = mcp_settings.SERVER_TITLE
    if version is not None and revision_has_icons(version):
        if mcp_settings.SERVER_DESCRIPTION:
            info["description"] = mcp_settings.SERVER_DESCRIPTION
        if mcp_settings.SERVER_WEBSITE_URL:
            info["websiteUrl"] = mcp_settings.SERVER_WEBSITE_URL
        if mcp_settings.SERVER_ICONS and icons is not None:
            described = icons.describe(mcp_settings.SERVER_ICONS)
            if described:
                info["icons"] = described
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
    if era == Era.MODERN:
        extensions[TASKS_EXTENSION] = {}  # the tasks extension attaches to 2026-07-28 only
    if extensions:
        caps["extensions"] = extensions
    return caps
