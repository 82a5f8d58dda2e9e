"""System checks: misconfiguration is reported at ``manage.py check`` and at startup.

Ids are stable (projects silence them by id); docs/audit.md lists them, and each feature's
page its own (endpoints, limits, pipeline, extensions, tasks, skills, MCP Apps). The checks
of an endpoint's settings and handlers run for every endpoint and name it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.checks.security.base import (
    SECRET_KEY_INSECURE_PREFIX,
    SECRET_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_UNIQUE_CHARACTERS,
)
from django.core.exceptions import ImproperlyConfigured

from .conf import SETTINGS, did_you_mean, mcp_settings, user_settings
from .handlers import TOOL_NAME_MAX
from .registry import endpoints


def reads_settings(check: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """A check of settings' values, silent while one is invalid (check_settings reports it)."""

    @functools.wraps(check)
    def checked(app_configs: Any = None, **kwargs: Any) -> list[Any]:
        try:
            return check(app_configs, **kwargs)
        except ImproperlyConfigured:
            return []

    return checked


@register(Tags.security, deploy=False)
@reads_settings
def check_request_state_key(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W001: keys derived from a SECRET_KEY Django's own deploy check (security.W009) finds weak;
    checked without --deploy, since uvicorn runs no checks (an empty or short key is E017)."""
    if mcp_settings.REQUEST_STATE_KEY or settings.DEBUG:
        return []
    secrets: list[tuple[str, str | bytes]] = [("SECRET_KEY", settings.SECRET_KEY)]
    secrets += [(f"SECRET_KEY_FALLBACKS[{i}]", v) for i, v in enumerate(settings.SECRET_KEY_FALLBACKS)]
    weak = []
    for name, value in secrets:
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        # Django's own test of a SECRET_KEY (security.W009), on one key.
        if (
            len(set(text)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS
            or len(text) < SECRET_KEY_MIN_LENGTH
            or text.startswith(SECRET_KEY_INSECURE_PREFIX)
        ):
            weak.append(name)
    if not weak:
        return []
    return [
        Warning(
            "MCP_DJANGO['REQUEST_STATE_KEY'] is not set, so requestState and legacy sessions are sealed "
            f"with keys derived from a weak {' and a weak '.join(weak)} (shorter than {SECRET_KEY_MIN_LENGTH} "
            f"characters, fewer than {SECRET_KEY_MIN_UNIQUE_CHARACTERS} distinct ones, or Django's "
            f"'{SECRET_KEY_INSECURE_PREFIX}' placeholder): anyone who guesses it can forge them.",
            hint="Give SECRET_KEY a long random value (django.core.management.utils.get_random_secret_key()), "
            "or set REQUEST_STATE_KEY to a secret of 32 bytes or more (python manage.py mcp_generate_key).",
            id="mcp_django.W001",
        )
    ]


def _where(registry: Any) -> str:
    """How a message names an endpoint's settings: the project-wide key, or the endpoint's own."""
    return "" if registry.name == "default" else f" (endpoint {registry.name!r})"


def own_settings(key: str) -> list[Any]:
    """The endpoints whose ``key`` is their own to check: the default, and those that set it
    (the others read the default's value, reported once)."""
    return [r for r in endpoints() if r.name == "default" or r.settings.overrides(key)]


def setting_name(registry: Any, key: str) -> str:
    if registry.settings.overrides(key):
        return f"MCP_DJANGO['ENDPOINTS'][{registry.name!r}][{key!r}]"
    return f"MCP_DJANGO[{key!r}]" + _where(registry)


@register(Tags.security)
@reads_settings
def check_anonymous(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    if settings.DEBUG:
        return []
    found = [registry for registry in own_settings("ALLOW_ANONYMOUS") if registry.settings.ALLOW_ANONYMOUS]
    return [
        Warning(
            f"{setting_name(registry, 'ALLOW_ANONYMOUS')} is on while DEBUG is off: anyone can call the MCP endpoint"
            f"{'' if registry.name == 'default' else ' ' + repr(registry.name)}.",
            hint="Turn it off, or restrict each handler with permissions=... or allow_anonymous=False.",
            id="mcp_django.W003",
        )
        for registry in found
    ]


@register()
@reads_settings
def check_endpoints(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W013 for settings of an endpoint that does not exist, E014 for two endpoints with one RESOURCE_URL."""
    named = {registry.name: registry for registry in endpoints()}
    resources: dict[str, list[str]] = {}
    for registry in named.values():
        resource = registry.settings.RESOURCE_URL
        if resource:
            resources.setdefault(resource.rstrip("/"), []).append(registry.name)
    errors: list[Any] = [
        Warning(
            f"MCP_DJANGO['ENDPOINTS'] has settings for {name!r}, but no endpoint has that name: they apply nowhere.",
            hint=f"The endpoints are {', '.join(map(repr, named))}: an endpoint is Registry('NAME') in your code.",
            id="mcp_django.W013",
        )
        for name in mcp_settings.ENDPOINTS
        if name not in named
    ]
    for resource, names in resources.items():
        if len(names) > 1:
            errors.append(
                Error(
                    f"The endpoints {', '.join(map(repr, names))} have one RESOURCE_URL, {resource!r}: a "
                    "requestState or an OAuth token issued for one would be accepted at the others.",
                    hint="Give each endpoint its own in MCP_DJANGO['ENDPOINTS'][NAME]['RESOURCE_URL'] "
                    "(its canonical URL), or unset RESOURCE_URL so each is derived from its path.",
                    id="mcp_django.E014",
                )
            )
    return errors


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
    return [error for registry in endpoints() for error in handler_problems(registry)]


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def handler_problems(registry: Any) -> list[Any]:
    """E005, E006, E015 and E016 for one registry (every endpoint's at ``manage.py check``)."""
    from .schema import SchemaArguments

    # Builds the views registered by dotted path: their tools' names count below.
    errors: list[Any] = [
        Error(
            f"{failure}{_where(registry)}",
            hint="Check the dotted path (module.attribute) and the options register_view was given.",
            id="mcp_django.E015",
        )
        for failure in registry.tools.resolve(strict=False)
    ]
    errors += [
        Error(
            f"{primitive} {name!r} is registered twice{_where(registry)}; {source} was ignored.",
            hint="Give one of them another name (name=... on its decorator).",
            id="mcp_django.E006",
        )
        for primitive, name, source in registry.duplicates
    ]
    for tool in registry.tools.ready.values():
        # E005: a name clients refuse.
        problem = ""
        if len(tool.name) > TOOL_NAME_MAX:
            problem = f"tool name {tool.name!r} is longer than {TOOL_NAME_MAX} characters"
        elif not _TOOL_NAME.match(tool.name):
            problem = f"tool name {tool.name!r} may use only letters, digits, '_', '-' and '.'"
        if problem:
            errors.append(
                Error(
                    problem + _where(registry),
                    hint=f"Pass name=... to the decorator: at most {TOOL_NAME_MAX} characters of letters, digits, '_', '-', '.'.",
                    id="mcp_django.E005",
                )
            )
        # E016: an input_schema= that does not compile (registration checks only its shape).
        if isinstance(tool.parameters, SchemaArguments):
            try:
                tool.parameters.validator  # noqa: B018 - compiled here, the check's point
            except ImproperlyConfigured as exc:
                errors.append(
                    Error(
                        f"{exc}{_where(registry)}.",
                        hint="Fix the schema: it must be valid against its draft's meta-schema (Draft 2020-12 without $schema).",
                        id="mcp_django.E016",
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
            f"MCP_DJANGO has an unknown key {str(key)!r}{did_you_mean([key], SETTINGS)}: it is ignored.",
            hint="Remove it or correct its spelling; the settings are listed in docs/index.md.",
            id="mcp_django.E009",
        )
        for key in user_settings()
        if key not in SETTINGS
    ]
    return errors + [
        Error(
            f"MCP_DJANGO[{name!r}] {problem}.",
            hint=f"The default is {SETTINGS[name].default!r}; see the settings table in docs/index.md.",
            id=problem.check_id,
        )
        for name, problem in mcp_settings.problems()
    ]


@register()
@reads_settings
def check_token_authentication(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    from .auth import token_model_missing

    errors = []
    for registry in own_settings("AUTHENTICATION_CLASSES"):
        if any(token_model_missing(cls) for cls in registry.settings.AUTHENTICATION_CLASSES):
            where = setting_name(registry, "AUTHENTICATION_CLASSES")
            errors.append(
                Error(
                    f"{where} uses DRF's TokenAuthentication, but "
                    "'rest_framework.authtoken' is not in INSTALLED_APPS: its tokens have no table, "
                    "and a request with a token is refused.",
                    hint="Add 'rest_framework.authtoken' to INSTALLED_APPS and migrate, or drop "
                    f"TokenAuthentication from {where}.",
                    id="mcp_django.E012",
                )
            )
    return errors


@register()
@reads_settings
def check_dpop(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E060: DPoP on (mcp_django.contrib.dpop) where jwcrypto, which checks the proofs, is missing."""
    import importlib.util

    on = [registry for registry in own_settings("DPOP") if registry.settings.DPOP != "off"]
    if not on or importlib.util.find_spec("jwcrypto") is not None:
        return []
    return [
        Error(
            f"{setting_name(registry, 'DPOP')} is {registry.settings.DPOP!r}, but jwcrypto is not installed: "
            "no DPoP proof can be checked, and every request with a DPoP-bound token would fail.",
            hint='pip install "django-mcp-endpoint[dpop]" (jwcrypto), or set it to "off".',
            id="mcp_django.E060",
        )
        for registry in on
    ]


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


from .limits import checks as limit_checks  # noqa: E402, F401 - registers the limits' checks
