"""The token rows: an MCP token, ``mcp_<prefix>_<secret>``, one client's credential for one
user; and the key a django-oauth-toolkit access token is bound to (DPoP).

An MCP token's prefix is the row's public id; only the SHA-256 of the secret is stored (a fast
hash is right for 256 random bits, and a slow one would cost every request)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

TOKEN_PREFIX = "mcp_"
# mcp_<hex id>_<url-safe base64 secret>, as set_new_secret makes them.
_SHAPE = re.compile(r"mcp_([0-9a-f]{1,16})_([A-Za-z0-9_-]{1,128})")


def token_checksum(token: str) -> str:
    """The SHA-256 of a token's text, in hex (what django-oauth-toolkit's ``token_checksum`` holds)."""
    return hashlib.sha256(token.encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """``(prefix, secret)`` of a token's text, or None when it is not one of ours."""
    found = _SHAPE.fullmatch(token)
    # Checked before any query: PostgreSQL refuses a lookup with a NUL instead of finding nothing.
    return (found[1], found[2]) if found else None


class MCPTokenQuerySet(models.QuerySet["MCPToken"]):
    def usable(self) -> MCPTokenQuerySet:
        unexpired = models.Q(expires__isnull=True) | models.Q(expires__gt=timezone.now())
        return self.filter(unexpired, revoked__isnull=True)

    def issue(
        self,
        user: Any,
        name: str,
        *,
        scopes: Iterable[str] = (),
        handlers: Iterable[str] = (),
        expires: datetime | None = None,
        jkt: str = "",
    ) -> tuple[MCPToken, str]:
        """A new token for ``user``, and its full text (shown this once). ``jkt``: the RFC 7638
        thumbprint of the client's key, to bind the token to it (DPoP)."""
        token = self.model(
            user=user, name=name, scopes=" ".join(scopes), handlers=" ".join(handlers), expires=expires, jkt=jkt
        )
        return token, token.set_new_secret()


class MCPToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE, related_name="mcp_tokens"
    )
    name = models.CharField(_("name"), max_length=100, help_text=_("Which client this token is for."))
    prefix = models.CharField(_("id"), max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(_("secret hash"), max_length=64, editable=False)
    scopes = models.CharField(
        _("scopes"),
        max_length=500,
        blank=True,
        help_text=_("Space-separated. Empty: every scope (the user's full authority)."),
    )
    handlers = models.TextField(
        _("handlers"),
        blank=True,
        help_text=_("Names of the tools, prompts and resources it may use, space-separated. Empty: all of them."),
    )
    created = models.DateTimeField(_("created"), default=timezone.now, editable=False)
    expires = models.DateTimeField(_("expires"), null=True, blank=True, help_text=_("Empty: never."))
    last_used = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)
    revoked = models.DateTimeField(_("revoked"), null=True, blank=True, editable=False)
    # DPoP (RFC 9449): the SHA-256 JWK thumbprint of the key the token is bound to ("": a bearer token).
    jkt = models.CharField(
        _("bound key"),
        max_length=64,
        blank=True,
        default="",
        editable=False,
        help_text=_("The thumbprint of the key whose DPoP proofs must come with the token. Empty: none."),
    )

    objects = MCPTokenQuerySet.as_manager()

    class Meta:
        verbose_name = _("MCP token")
        verbose_name_plural = _("MCP tokens")
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    def set_new_secret(self) -> str:
        """Save the row with a fresh prefix and secret; the full token text, returned once."""
        self.prefix = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        self.secret_hash = token_checksum(secret)
        self.save()
        return f"{TOKEN_PREFIX}{self.prefix}_{secret}"

    def secret_matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash, token_checksum(secret))

    @property
    def mcp_credential_label(self) -> str:
        """How audit rows and logs name it: never the secret."""
        return str(self)

    @property
    def is_expired(self) -> bool:
        return self.expires is not None and self.expires <= timezone.now()

    def revoke(self) -> None:
        if self.revoked is None:
            self.revoked = timezone.now()
            self.save(update_fields=["revoked"])

    # What the scope checks ask of a credential, as of django-oauth-toolkit's tokens.
    def allow_scopes(self, scopes: Iterable[str]) -> bool:
        granted = self.scopes.split()
        return not granted or set(scopes) <= set(granted)

    def mcp_allows_handler(self, handler: Any) -> bool:
        """Whether this token may use ``handler`` (a tool, prompt, resource or template)."""
        allowed = self.handlers.split()
        return not allowed or handler.name in allowed


class BoundAccessToken(models.Model):
    """The toolkit's model has no confirmation claim: an authorization server in this project
    records the key's thumbprint (``cnf.jkt``) here, under the token's SHA-256, and
    :class:`mcp_django.contrib.oauth.OAuth2Authentication` reads it. No row: a bearer token."""

    token_checksum = models.CharField(_("token checksum"), max_length=64, unique=True)
    jkt = models.CharField(_("bound key"), max_length=64)
    # When the token expires: the row is useless past it, and is deleted by the next binding.
    expires = models.DateTimeField(_("expires"), db_index=True)

    class Meta:
        verbose_name = _("DPoP-bound access token")
        verbose_name_plural = _("DPoP-bound access tokens")

    def __str__(self) -> str:
        return f"access token bound to {self.jkt}"

    @classmethod
    def bind(cls, token: str, jkt: str, expires: datetime) -> None:
        """Record that ``token`` (its text) is good only with proofs by the key ``jkt``."""
        cls.objects.filter(expires__lt=timezone.now()).delete()
        cls.objects.update_or_create(token_checksum=token_checksum(token), defaults={"jkt": jkt, "expires": expires})

    @classmethod
    def jkt_of(cls, token: str) -> str:
        """The thumbprint ``token`` is bound to; "" for a bearer token."""
        found = cls.objects.filter(token_checksum=token_checksum(token)).values_list("jkt", flat=True).first()
        return found or ""
