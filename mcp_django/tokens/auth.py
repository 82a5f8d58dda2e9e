"""``Authorization: Bearer mcp_...``: the app's own MCP tokens (:class:`~mcp_django.tokens.models.MCPToken`).

:class:`MCPTokenAuthentication` answers only for tokens that start with ``mcp_``: put it
before ``TokenAuthentication`` and the OAuth class in ``AUTHENTICATION_CLASSES``.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone
from rest_framework import authentication, exceptions

from .. import protected_resource
from ..contrib import dpop
from ..lifecycle import host_thread
from .models import TOKEN_PREFIX, MCPToken, split_token

__all__ = ["MCPTokenAuthentication"]


logger = logging.getLogger("mcp_django")

# last_used is a hint for the token's owner, not an audit trail: written at most
# once a minute per token and process, off the request's path.
TOUCH_SECONDS = 60.0
_touched: dict[int, float] = {}
_touch_lock = threading.Lock()
_toucher: ThreadPoolExecutor | None = None


def _write_last_used(pk: int, now: datetime.datetime) -> None:
    try:
        # Conditional: several processes touching one token write it once a minute, not each.
        stale = now - datetime.timedelta(seconds=TOUCH_SECONDS)
        fresh = Q(last_used__isnull=True) | Q(last_used__lt=stale)
        MCPToken.objects.filter(fresh, pk=pk).update(last_used=now)
    except Exception:
        logger.warning("could not record an MCP token's last use", exc_info=True)
    finally:
        if host_thread.get() is None:  # a host's connections are the host's to close
            close_old_connections()


def touch(token: MCPToken) -> None:
    """Record that ``token`` was used now, unless this process did within the last minute."""
    global _toucher
    now = time.monotonic()
    with _touch_lock:
        last = _touched.get(token.pk)
        if last is not None and now - last < TOUCH_SECONDS:
            return
        if len(_touched) > 100_000:
            _touched.clear()
        _touched[token.pk] = now
        if _toucher is None and host_thread.get() is None:
            _toucher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-token-touch")
    if host_thread.get() is not None:
        # A host's requests share its transaction (lifecycle.host_thread): written there.
        _write_last_used(token.pk, timezone.now())
        return
    assert _toucher is not None
    _toucher.submit(_write_last_used, token.pk, timezone.now())


class MCPTokenAuthentication(authentication.BaseAuthentication):
    """An MCP token in ``Authorization: Bearer mcp_<id>_<secret>``, refused (401) when unknown,
    revoked, expired or its user inactive. It is the request's ``auth``: its scopes and handler
    list restrict the handlers, and audit rows name it."""

    # Reads nothing but the Authorization header: the principal cache may key on it.
    mcp_reads_only_headers = True
    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[Any, MCPToken] | None:
        django_request = getattr(request, "_request", request)
        scheme, value = dpop.credentials(request.META.get("HTTP_AUTHORIZATION", ""))
        if scheme is None or (scheme == "dpop" and dpop.mode(django_request) == "off"):
            return None
        if not value.startswith(TOKEN_PREFIX):
            return None  # another class's token (an OAuth access token)
        parts = split_token(value)
        if parts is None:
            self._refuse(request, "The MCP token is invalid.")
        prefix, secret = parts
        token = MCPToken.objects.select_related("user").filter(prefix=prefix).first()
        if token is None or not token.secret_matches(secret):
            self._refuse(request, "The MCP token is invalid.")
        if token.revoked is not None:
            self._refuse(request, "The MCP token was revoked.")
        if token.is_expired:
            self._refuse(request, "The MCP token has expired.")
        if not token.user.is_active:
            self._refuse(request, "User inactive or deleted.")
        # Bound to a key (MCPToken.jkt): only as DPoP, with a proof by it.
        dpop.enforce(request, django_request, scheme, value, token.jkt)
        touch(token)
        return token.user, token

    @staticmethod
    def _refuse(request: Any, description: str) -> NoReturn:
        # Read by the endpoint's Bearer challenge when it is an OAuth protected resource.
        request.oauth2_error = {"error": "invalid_token", "error_description": description}
        raise exceptions.AuthenticationFailed(description)

    def authenticate_header(self, request: Any) -> str:
        if dpop.mode(request) == "off":
            return 'Bearer realm="mcp"'
        error = getattr(request, "oauth2_error", None) or {}
        return protected_resource.challenge(
            request, error.get("error"), error.get("error_description"), scheme=error.get("scheme"), metadata=False
        )
