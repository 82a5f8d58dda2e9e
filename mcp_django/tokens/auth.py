"""``Authorization: Bearer mcp_...``: the app's own MCP tokens (:class:`~mcp_django.tokens.models.MCPToken`).
The class answers only for tokens that start ``mcp_``, so it goes before ``TokenAuthentication``
and the OAuth class in ``AUTHENTICATION_CLASSES`` (W040, below, says so otherwise)."""

from __future__ import annotations

import datetime
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core.checks import Warning, register
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone
from rest_framework import authentication

from ..checks import own_settings, reads_settings, setting_name
from ..contrib import dpop
from ..lifecycle import host_thread
from ..protected_resource import challenge, refuse
from .models import TOKEN_PREFIX, MCPToken, split_token

__all__ = ["MCPTokenAuthentication"]


logger = logging.getLogger("mcp_django")

# last_used is a hint for the token's owner, not an audit trail: written at most once a minute
# per token, off the request's path.
TOUCH = datetime.timedelta(minutes=1)
# Its thread starts with the first write.
_toucher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-token-touch")


def _write_last_used(pk: int, now: datetime.datetime) -> None:
    try:
        # Conditional: several processes that read the same stale row write it once, not each.
        fresh = Q(last_used__isnull=True) | Q(last_used__lt=now - TOUCH)
        MCPToken.objects.filter(fresh, pk=pk).update(last_used=now)
    except Exception:
        logger.warning("could not record an MCP token's last use", exc_info=True)
    finally:
        if host_thread.get() is None:  # a host's connections are the host's to close
            close_old_connections()


def touch(token: MCPToken) -> None:
    """Record that ``token`` (its row as just read) was used now, unless it was within the last minute."""
    now = timezone.now()
    if token.last_used is not None and now - token.last_used < TOUCH:
        return
    if host_thread.get() is not None:
        # A host's requests share its transaction (lifecycle.host_thread): written there.
        _write_last_used(token.pk, now)
    else:
        _toucher.submit(_write_last_used, token.pk, now)


class MCPTokenAuthentication(authentication.BaseAuthentication):
    """An MCP token in ``Authorization: Bearer mcp_<id>_<secret>``, refused (401) when unknown,
    revoked, expired or its user inactive. It is the request's ``auth``: its scopes and handler
    list restrict the handlers, and audit rows name it."""

    # Reads nothing but the Authorization header: the principal cache may key on it.
    mcp_reads_only_headers = True
    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[Any, MCPToken] | None:
        found = dpop.credentials(request)
        if found is None or not found[2].startswith(TOKEN_PREFIX):
            return None  # no token, or another class's (an OAuth access token)
        django_request, scheme, value = found
        # The refusals are read by the endpoint's Bearer challenge when it is an OAuth protected resource.
        parts = split_token(value)
        if parts is None:
            refuse(request, "The MCP token is invalid.")
        prefix, secret = parts
        token = MCPToken.objects.select_related("user").filter(prefix=prefix).first()
        if token is None or not token.secret_matches(secret):
            refuse(request, "The MCP token is invalid.")
        if token.revoked is not None:
            refuse(request, "The MCP token was revoked.")
        if token.is_expired:
            refuse(request, "The MCP token has expired.")
        if not token.user.is_active:
            refuse(request, "User inactive or deleted.")
        # Bound to a key (MCPToken.jkt): only as DPoP, with a proof by it.
        dpop.enforce(request, django_request, scheme, value, token.jkt)
        touch(token)
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        if dpop.mode(request) == "off":
            return 'Bearer realm="mcp"'
        return challenge(request, metadata=False, refused=request)


def _takes_every_bearer(cls: Any) -> bool:
    if not isinstance(cls, type):
        return False
    if issubclass(cls, authentication.TokenAuthentication) and str(cls.keyword).lower() == "bearer":
        return True
    try:
        from oauth2_provider.contrib.rest_framework import OAuth2Authentication
    except ImportError:
        return False
    return issubclass(cls, OAuth2Authentication)


# W040, registered when mcp_django.apps imports this module.
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
