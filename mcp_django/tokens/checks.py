"""W040 (registered at startup, by ``mcp_django.apps``): ``MCPTokenAuthentication`` after a class that refuses every ``Bearer`` token it does not
know (django-oauth-toolkit's, or a ``TokenAuthentication`` whose keyword is ``Bearer``)."""

from __future__ import annotations

from typing import Any

from django.core.checks import Warning, register
from rest_framework.authentication import TokenAuthentication

from ..checks import own_settings, reads_settings, setting_name
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
@reads_settings
def check_token_class_order(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    warnings = []
    for registry in own_settings("AUTHENTICATION_CLASSES"):
        classes = list(registry.settings.AUTHENTICATION_CLASSES)
        ours = [i for i, cls in enumerate(classes) if isinstance(cls, type) and issubclass(cls, MCPTokenAuthentication)]
        before = [cls for cls in classes[: ours[0]] if _takes_every_bearer(cls)] if ours else []
        if not before:
            continue
        names = ", ".join(f"{cls.__module__}.{cls.__qualname__}" for cls in before)
        warnings.append(
            Warning(
                f"{setting_name(registry, 'AUTHENTICATION_CLASSES')} lists MCPTokenAuthentication after {names}, "
                "which refuses every Bearer token it does not know: MCP tokens would all be refused.",
                hint="Move mcp_django.tokens.auth.MCPTokenAuthentication before it (it answers only for "
                "tokens starting mcp_, and leaves the others to the classes after it).",
                id="mcp_django.W040",
            )
        )
    return warnings
