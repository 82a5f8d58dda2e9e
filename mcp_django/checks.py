"""System checks: misconfiguration is reported at ``manage.py check`` and at startup."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from .conf import mcp_settings

MIN_KEY_BYTES = 32


@register(Tags.security, deploy=False)
def check_request_state_key(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    keys = mcp_settings.REQUEST_STATE_KEY
    if not keys:
        if settings.DEBUG:
            return []
        return [
            Warning(
                "MCP_DJANGO['REQUEST_STATE_KEY'] is not set: requestState is sealed with a random "
                "per-process key, so a flow that reaches another process or outlives a restart is refused.",
                hint="Set it to a secret of 32 bytes or more (python manage.py mcp_generate_key).",
                id="mcp_django.W001",
            )
        ]
    short = [i for i, key in enumerate(keys) if len(key) < MIN_KEY_BYTES]
    if short:
        return [
            Warning(
                f"MCP_DJANGO['REQUEST_STATE_KEY'] has a key shorter than {MIN_KEY_BYTES} bytes (position {short[0]}).",
                hint="Use a random secret of 32 bytes or more (python manage.py mcp_generate_key).",
                id="mcp_django.W002",
            )
        ]
    return []


@register(Tags.security)
def check_anonymous(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    if mcp_settings.ALLOW_ANONYMOUS and not settings.DEBUG:
        return [
            Warning(
                "MCP_DJANGO['ALLOW_ANONYMOUS'] is on while DEBUG is off: anyone can call the MCP endpoint.",
                hint="Turn it off, or restrict each handler with permissions=... or allow_anonymous=False.",
                id="mcp_django.W003",
            )
        ]
    return []


@register()
def check_asgi(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    if apps.is_installed("channels") and not getattr(settings, "ASGI_APPLICATION", None):
        return [
            Error(
                "Channels is installed but ASGI_APPLICATION is not set, so websockets cannot be served.",
                hint="Set ASGI_APPLICATION to your project's asgi application (e.g. 'project.asgi.application').",
                id="mcp_django.E004",
            )
        ]
    return []


@register()
def check_handlers(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    from .registry import TOOL_NAME_MAX, mcp, name_problems

    errors: list[Any] = [
        Error(problem, hint=f"Pass name=... (at most {TOOL_NAME_MAX} characters).", id="mcp_django.E005")
        for problem in name_problems(mcp)
    ]
    for kind, name, source in mcp.duplicates:
        errors.append(
            Error(
                f"{kind} {name!r} is registered twice; {source} was ignored.",
                hint="Give one of them another name.",
                id="mcp_django.E006",
            )
        )
    return errors


@register()
def check_authentication_classes(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    try:
        mcp_settings.AUTHENTICATION_CLASSES  # noqa: B018 - importing them is the check
    except ImportError as exc:
        return [
            Error(
                f"MCP_DJANGO['AUTHENTICATION_CLASSES'] names a class that cannot be imported: {exc}",
                hint="Use dotted paths of DRF authentication classes.",
                id="mcp_django.E007",
            )
        ]
    return []
