"""System checks: misconfiguration is reported at ``manage.py check`` and at startup.

Ids are stable (projects silence them by id):

- W001 no REQUEST_STATE_KEY while DEBUG is off
- W002 a REQUEST_STATE_KEY shorter than 32 bytes
- W003 anonymous access allowed while DEBUG is off
- W004 daphne installed without ASGI_APPLICATION (runserver cannot start);
  until 0.1 this was E004, raised for Channels, which never needed it
- E005 a tool name clients refuse (over 64 characters, or other characters)
- E006 a tool, prompt or resource name registered twice
- E007 an authentication class that cannot be imported
- E008 an AUDIT setting that is not a dict, has unknown keys or wrong values
- E009 an unknown key in MCP_DJANGO (with the nearest known name)
- E010 a setting of the wrong type or out of range
- E011 an ALLOWED_ORIGINS entry that is not an origin (no scheme, a path)
- E012 TokenAuthentication without rest_framework.authtoken installed
- W020 this process lost audit rows (a full queue, or rows the database refused)
- E030, W030, W031 the task backend of tools that run as MCP tasks (mcp_django/tasks/checks.py)
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

from .conf import SETTINGS, mcp_settings

MIN_KEY_BYTES = 32


@register(Tags.security, deploy=False)
def check_request_state_key(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    try:
        keys = mcp_settings.REQUEST_STATE_KEY
    except ImproperlyConfigured:
        return []  # check_settings reports it
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
    try:
        anonymous = mcp_settings.ALLOW_ANONYMOUS
    except ImproperlyConfigured:
        return []  # check_settings reports it
    if anonymous and not settings.DEBUG:
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
    # Only daphne's runserver (and Channels' runworker) look ASGI_APPLICATION up:
    # uvicorn and daphne are given the application's path, and mcp-django needs
    # neither the setting nor "channels" in INSTALLED_APPS.
    if apps.is_installed("daphne") and not getattr(settings, "ASGI_APPLICATION", None):
        return [
            Warning(
                "daphne is in INSTALLED_APPS but ASGI_APPLICATION is not set: `manage.py runserver` "
                "will not start (uvicorn and daphne given the application's path are unaffected).",
                hint="Set ASGI_APPLICATION to your project's ASGI application (e.g. 'mysite.asgi.application'), "
                "or remove daphne from INSTALLED_APPS.",
                id="mcp_django.W004",
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
    for primitive, name, source in registry.duplicates:
        errors.append(
            Error(
                f"{primitive} {name!r} is registered twice; {source} was ignored.",
                hint="Give one of them another name (name=... on its decorator).",
                id="mcp_django.E006",
            )
        )
    return errors


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E009 for a key that is no setting, E007/E008/E010/E011 for a value its coercer refuses."""
    raw = getattr(settings, "MCP_DJANGO", None)
    if raw is not None and not isinstance(raw, dict):
        return [
            Error(
                f"MCP_DJANGO must be a dict, not {type(raw).__name__}.",
                hint="See the settings table in docs/index.md.",
                id="mcp_django.E010",
            )
        ]
    errors: list[Any] = [
        Error(
            f"MCP_DJANGO has an unknown key {key!r}{guess}: it is ignored.",
            hint="Remove it or correct its spelling; the settings are listed in docs/index.md.",
            id="mcp_django.E009",
        )
        for key, guess in mcp_settings.unknown_keys()
    ]
    for name, problem in mcp_settings.problems():
        errors.append(
            Error(
                f"MCP_DJANGO[{name!r}] {problem}.",
                hint=f"The default is {SETTINGS[name].default!r}; see the settings table in docs/index.md.",
                id=problem.check_id,
            )
        )
    return errors


TOKEN_AUTHENTICATION = "rest_framework.authentication.TokenAuthentication"


@register()
def check_token_authentication(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    try:
        classes = mcp_settings.AUTHENTICATION_CLASSES
    except ImproperlyConfigured:
        return []  # check_settings reports it
    from .auth import token_model_missing

    if any(token_model_missing(cls) for cls in classes):
        return [
            Error(
                "MCP_DJANGO['AUTHENTICATION_CLASSES'] uses DRF's TokenAuthentication, but "
                "'rest_framework.authtoken' is not in INSTALLED_APPS: its tokens have no table, "
                "and a request with a token is refused.",
                hint="Add 'rest_framework.authtoken' to INSTALLED_APPS and migrate, or drop "
                "TokenAuthentication from MCP_DJANGO['AUTHENTICATION_CLASSES'].",
                id="mcp_django.E012",
            )
        ]
    return []


@register()
def check_audit_losses(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Rows the running process could not write (run the checks inside it to see them)."""
    from .audit import stats

    lost = stats()
    if not lost["dropped"] and not lost["rejected"]:
        return []
    return [
        Warning(
            f"This process lost {lost['dropped']} audit row(s) to a full queue and the database "
            f"refused {lost['rejected']}.",
            hint="Raise MCP_DJANGO['AUDIT']['QUEUE_SIZE'] if the database was down or slow for long; "
            "the mcp_django.audit log names each refused row.",
            id="mcp_django.W020",
        )
    ]


from .tasks import checks as task_checks  # noqa: E402, F401 - registers the MCP tasks' checks
