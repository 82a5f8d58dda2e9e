"""System checks: misconfiguration is reported at ``manage.py check`` and at startup.

Ids are stable (projects silence them by id):

- W001 no REQUEST_STATE_KEY while DEBUG is off
- W002 a REQUEST_STATE_KEY shorter than 32 bytes
- W003 anonymous access allowed while DEBUG is off
- E004 Channels installed without ASGI_APPLICATION
- E005 a tool name clients refuse (over 64 characters, or other characters)
- E006 a tool, prompt or resource name registered twice
- E007 an authentication class that cannot be imported
- E008 an AUDIT setting that is not a dict or has unknown keys
"""

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
    # Every short key is named: with rotation, an old short key still verifies forged states.
    return [
        Warning(
            f"MCP_DJANGO['REQUEST_STATE_KEY'] key at position {i} is {len(key)} bytes; "
            f"at least {MIN_KEY_BYTES} are needed.",
            hint="Use a random secret of 32 bytes or more (python manage.py mcp_generate_key), "
            "and drop short keys from the rotation list.",
            id="mcp_django.W002",
        )
        for i, key in enumerate(keys)
        if len(key) < MIN_KEY_BYTES
    ]


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
    from .registry import mcp

    return handler_problems(mcp)


def handler_problems(registry: Any) -> list[Any]:
    """E005 and E006 for one registry (the default one at ``manage.py check``)."""
    from .registry import TOOL_NAME_MAX, name_problems

    errors: list[Any] = [
        Error(
            problem,
            hint=f"Pass name=... to the decorator: at most {TOOL_NAME_MAX} characters of letters, digits, '_', '-', '.'.",
            id="mcp_django.E005",
        )
        for problem in name_problems(registry)
    ]
    for kind, name, source in registry.duplicates:
        errors.append(
            Error(
                f"{kind} {name!r} is registered twice; {source} was ignored.",
                hint="Give one of them another name (name=... on its decorator).",
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


@register()
def check_audit_setting(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    from .conf import AUDIT_DEFAULTS

    user = (getattr(settings, "MCP_DJANGO", None) or {}).get("AUDIT", {})
    if user is None:
        user = {}
    if not isinstance(user, dict):
        return [
            Error(
                "MCP_DJANGO['AUDIT'] must be a dict.",
                hint=f"Use a dict with the keys {', '.join(AUDIT_DEFAULTS)}.",
                id="mcp_django.E008",
            )
        ]
    # A misspelt key would silently leave the default in force (rounds still written, say).
    unknown = sorted(set(user) - set(AUDIT_DEFAULTS))
    if unknown:
        return [
            Error(
                f"MCP_DJANGO['AUDIT'] has unknown key(s): {', '.join(map(str, unknown))}.",
                hint=f"The keys are {', '.join(AUDIT_DEFAULTS)}.",
                id="mcp_django.E008",
            )
        ]
    return []
