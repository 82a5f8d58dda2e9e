from __future__ import annotations

import contextlib

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules


class MCPDjangoConfig(AppConfig):
    name = "mcp_django"
    verbose_name = "MCP"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import audit, auth_cache, checks, extensions  # noqa: F401 - checks registers the system checks
        from .conf import mcp_settings
        from .tokens import auth as token_auth  # noqa: F401 - and the MCP tokens' own (W040)

        # The protocol extensions plug in first: the handlers' modules may use what they add.
        with contextlib.suppress(ImproperlyConfigured):  # a bad entry: system check E022
            extensions.load(mcp_settings.EXTENSIONS)

        # Like admin.py: every installed app's mcp.py registers its handlers.
        autodiscover_modules(mcp_settings.HANDLER_MODULE)
        auth_cache.connect()
        audit.connect()
        from .asks.guard import configure

        configure()  # the replay guard: on by DEBUG or REPLAY_GUARD, watching connections then
