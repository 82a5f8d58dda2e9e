"""System checks for MCP tokens (registered by ``mcp_django.checks``).

- W040 ``MCPTokenAuthentication`` comes after a class that takes every ``Bearer`` token
  (django-oauth-toolkit's, or a DRF ``TokenAuthentication`` whose keyword is ``Bearer``):
  that class refuses MCP tokens before this one sees them
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Warning, register
from django.core.exceptions import ImproperlyConfigured
from rest_framework.authentication import TokenAuthentication

from .auth import MCPTokenAuthentication


def _takes_every_bearer(cls: Any) -> bool:
    if not isinstance(cls, type):
        return False
    if issubclass(cls, TokenAuthentication) and str(cls.keyword).lower() == "bearer":
        return True
    try:
        from oauth2_provider.contrib.rest_framework import OAuth2Authentication
    except ImportError:
        return False
    return issubclass(cls, OAuth2Authentication)


@register()
def check_token_class_order(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    from ..registry import endpoints

    warnings = []
    # The default endpoint, and each that sets its own classes (the others use the default's).
    for registry in [r for r in endpoints() if r.name == "default" or r.settings.overrides("AUTHENTICATION_CLASSES")]:
        try:
            classes = list(registry.settings.AUTHENTICATION_CLASSES)
        except ImproperlyConfigured:
            return []  # check_settings reports it
        ours = [i for i, cls in enumerate(classes) if isinstance(cls, type) and issubclass(cls, MCPTokenAuthentication)]
        if not ours:
            continue
        before = [cls for cls in classes[: ours[0]] if _takes_every_bearer(cls)]
        if not before:
            continue
        names = ", ".join(f"{cls.__module__}.{cls.__qualname__}" for cls in before)
        where = (
            f"MCP_DJANGO['ENDPOINTS'][{registry.name!r}]['AUTHENTICATION_CLASSES']"
            if registry.settings.overrides("AUTHENTICATION_CLASSES")
            else "MCP_DJANGO['AUTHENTICATION_CLASSES']"
        )
        warnings.append(
            Warning(
                f"{where} lists MCPTokenAuthentication after {names}, "
                "which refuses every Bearer token it does not know: MCP tokens would all be refused.",
                hint="Move mcp_django.tokens.auth.MCPTokenAuthentication before it (it answers only for "
                "tokens starting mcp_, and leaves the others to the classes after it).",
                id="mcp_django.W040",
            )
        )
    return warnings
