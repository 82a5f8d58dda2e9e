"""django-oauth-toolkit access tokens bound to a client's key (DPoP, RFC 9449).

The toolkit's model has no confirmation claim, so an authorization server in this project
records the key's thumbprint (``cnf.jkt``) here, under the token's SHA-256, and
:class:`mcp_django.contrib.oauth.OAuth2Authentication` reads it. No row: a bearer token.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


def token_checksum(token: str) -> str:
    """The SHA-256 of a token's text, in hex (what django-oauth-toolkit's ``token_checksum`` holds)."""
    return hashlib.sha256(token.encode()).hexdigest()


class BoundAccessToken(models.Model):
    token_checksum = models.CharField(_("token checksum"), max_length=64, unique=True)
    jkt = models.CharField(_("bound key"), max_length=64)
    # When the token expires: the row is useless past it, and is deleted by the next binding.
    expires = models.DateTimeField(_("expires"), db_index=True)

    class Meta:
        app_label = "mcp_django"
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
