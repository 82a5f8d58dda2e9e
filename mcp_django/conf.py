"""The ``MCP_DJANGO`` settings dict, read through one object.

Every property reads ``django.conf.settings`` on access, so ``override_settings``
works in tests and nothing is written back into the settings module.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    # Secret(s) the requestState keys are derived from. A list rotates keys: the
    # first seals, every one verifies. None: a random key per process.
    "REQUEST_STATE_KEY": None,
    # Seal requestState with AES-256-GCM (the client cannot read it) instead of
    # signing it with HMAC-SHA256 (readable, tamper-evident).
    "ENCRYPT_REQUEST_STATE": False,
    # Seconds a requestState stays valid after it is issued.
    "REQUEST_STATE_LIFETIME": 600,
    # A longer requestState is refused before anything decodes it.
    "MAX_REQUEST_STATE_BYTES": 64 * 1024,
    # The most input_required rounds one request may take.
    "MAX_INPUT_ROUNDS": 10,
    # Serve callers that present no credentials, as the anonymous principal.
    "ALLOW_ANONYMOUS": False,
    # DRF authentication classes, tried in order.
    "AUTHENTICATION_CLASSES": [
        "mcp_django.auth.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    # Seconds an authenticated principal is remembered by its credentials (0: off).
    # A revoked token or deactivated user is seen at once by the process that made
    # the change, by other processes within this time.
    "AUTH_CACHE_SECONDS": 10,
    # Browser origins allowed besides the endpoint's own; "*" allows any.
    "ALLOWED_ORIGINS": [],
    # The largest request body accepted, in bytes.
    "MAX_REQUEST_BYTES": 4 * 1024 * 1024,
    # The name of the module discovered in each installed app.
    "HANDLER_MODULE": "mcp",
    "SERVER_NAME": "mcp-django",
    "SERVER_TITLE": None,
    "INSTRUCTIONS": None,
    # Caching hints on list results and resources/read (2026-07-28).
    "LIST_TTL_MS": 0,
    "CACHE_SCOPE": "private",
    # Seconds a legacy server-to-client request waits for the client's reply.
    "ASK_TIMEOUT": 300,
    # Seconds a legacy (2025-11-25 and earlier) Streamable HTTP session lives.
    "SESSION_LIFETIME": 86400,
    # The Django cache that shares legacy sessions' state (ended, log level) between
    # processes: a shared one (Redis) when several instances serve one client.
    "SESSION_CACHE": "default",
    # The audit log (mcp_django.models.AuditEvent); keys given here override
    # AUDIT_DEFAULTS one by one. Signals are sent either way: these only decide
    # which rows mcp-django itself writes.
    "AUDIT": {},
}

AUDIT_DEFAULTS: dict[str, Any] = {
    # False: write no rows at all (a project may keep only its own signal receivers).
    "ENABLED": True,
    # A row per input_required round (input-request keys and kinds).
    "ROUNDS": True,
    # A row per finished tools/call, prompts/get, resources/read (completed, failed, cancelled).
    "CALLS": True,
    # A row per legacy server-to-client request and its outcome.
    "ASKS": True,
    # A row per refused requestState and per missing-capability refusal, committed
    # before the client is answered.
    "REFUSALS": True,
    # The most rows the background writer inserts in one statement.
    "BATCH_SIZE": 500,
    # True: round, call and ask rows are queued and written after the response.
    # False: they too are committed before the response, like refusals: one more
    # database round trip per call, but nothing is written once a test has ended
    # (a test suite on in-memory SQLite, whose flush between tests cannot wait
    # for a concurrent writer, wants this).
    "ASYNC_WRITES": True,
}


class MCPSettings:
    """Typed access to ``settings.MCP_DJANGO`` merged over ``DEFAULTS``."""

    # Values are parsed once and kept as plain attributes (cached_property): they
    # sit on the per-request path. reload() drops them whenever Django reports
    # that MCP_DJANGO changed.

    def _get(self, name: str) -> Any:
        user = getattr(settings, "MCP_DJANGO", None) or {}
        return user.get(name, DEFAULTS[name])

    def reload(self) -> None:
        for name in [n for n in self.__dict__ if n.isupper()]:
            del self.__dict__[name]

    @cached_property
    def REQUEST_STATE_KEY(self) -> list[bytes] | None:
        value = self._get("REQUEST_STATE_KEY")
        if value in (None, "", [], ()):
            return None
        values = value if isinstance(value, (list, tuple)) else [value]
        return [v.encode() if isinstance(v, str) else bytes(v) for v in values if v]

    @cached_property
    def ENCRYPT_REQUEST_STATE(self) -> bool:
        return bool(self._get("ENCRYPT_REQUEST_STATE"))

    @cached_property
    def REQUEST_STATE_LIFETIME(self) -> int:
        return int(self._get("REQUEST_STATE_LIFETIME"))

    @cached_property
    def MAX_REQUEST_STATE_BYTES(self) -> int:
        return int(self._get("MAX_REQUEST_STATE_BYTES"))

    @cached_property
    def MAX_INPUT_ROUNDS(self) -> int:
        return int(self._get("MAX_INPUT_ROUNDS"))

    @cached_property
    def ALLOW_ANONYMOUS(self) -> bool:
        return bool(self._get("ALLOW_ANONYMOUS"))

    @cached_property
    def AUTHENTICATION_CLASSES(self) -> list[type]:
        return [import_string(p) if isinstance(p, str) else p for p in self._get("AUTHENTICATION_CLASSES")]

    @cached_property
    def AUTH_CACHE_SECONDS(self) -> float:
        return float(self._get("AUTH_CACHE_SECONDS"))

    @cached_property
    def ALLOWED_ORIGINS(self) -> list[str]:
        return list(self._get("ALLOWED_ORIGINS"))

    @cached_property
    def MAX_REQUEST_BYTES(self) -> int:
        return int(self._get("MAX_REQUEST_BYTES"))

    @cached_property
    def HANDLER_MODULE(self) -> str:
        return str(self._get("HANDLER_MODULE"))

    @cached_property
    def SERVER_NAME(self) -> str:
        return str(self._get("SERVER_NAME"))

    @cached_property
    def SERVER_TITLE(self) -> str | None:
        return self._get("SERVER_TITLE")

    @cached_property
    def INSTRUCTIONS(self) -> str | None:
        return self._get("INSTRUCTIONS")

    @cached_property
    def LIST_TTL_MS(self) -> int:
        return int(self._get("LIST_TTL_MS"))

    @cached_property
    def CACHE_SCOPE(self) -> str:
        return str(self._get("CACHE_SCOPE"))

    @cached_property
    def ASK_TIMEOUT(self) -> float:
        return float(self._get("ASK_TIMEOUT"))

    @cached_property
    def SESSION_LIFETIME(self) -> int:
        return int(self._get("SESSION_LIFETIME"))

    @cached_property
    def SESSION_CACHE(self) -> str:
        return str(self._get("SESSION_CACHE"))

    @cached_property
    def AUDIT(self) -> dict[str, Any]:
        value = self._get("AUDIT")
        # A value that is not a dict is reported by check mcp_django.E008; run on the defaults meanwhile.
        audit = {**AUDIT_DEFAULTS, **(value if isinstance(value, dict) else {})}
        user = getattr(settings, "MCP_DJANGO", None) or {}
        if "AUDIT_ROUNDS" in user:  # the older spelling of AUDIT["ROUNDS"]
            audit["ROUNDS"] = bool(user["AUDIT_ROUNDS"])
        return audit

    @cached_property
    def AUDIT_ROUNDS(self) -> bool:
        audit = self.AUDIT
        return bool(audit["ENABLED"] and audit["ROUNDS"])


mcp_settings = MCPSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting in ("MCP_DJANGO", "DEBUG", "SECRET_KEY"):
        mcp_settings.reload()


setting_changed.connect(_reload)
