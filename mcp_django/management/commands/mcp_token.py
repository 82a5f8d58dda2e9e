"""Create, list and revoke MCP tokens (docs/authorization.md)."""

from __future__ import annotations

import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from mcp_django.tokens.models import MCPToken


def _duration(text: str) -> datetime.timedelta:
    """``30d``, ``12h``, ``90m`` or a number of days."""
    units = {"d": "days", "h": "hours", "m": "minutes"}
    unit = units.get(text[-1:].lower())
    number = text[:-1] if unit else text
    try:
        amount = float(number)
    except ValueError:
        raise CommandError(f"--expires: {text!r} is not a duration such as 30d, 12h or 90m") from None
    if amount <= 0:
        raise CommandError("--expires must be a positive duration")
    return datetime.timedelta(**{unit or "days": amount})


def _when(value: datetime.datetime | None, empty: str = "-") -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M") if value else empty


class Command(BaseCommand):
    help = "Create, list or revoke MCP tokens (a token's secret is printed once, when it is created)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a token for a user; prints it once.")
        create.add_argument("username")
        create.add_argument("name", help="Which client the token is for.")
        create.add_argument("--scope", action="append", default=[], help="Limit it to a scope (repeatable).")
        create.add_argument("--handler", action="append", default=[], help="Limit it to a handler (repeatable).")
        create.add_argument("--expires", type=_duration, help="Lifetime: 30d, 12h, 90m (default: never expires).")
        create.add_argument(
            "--jkt",
            default="",
            help="Bind it to the client's key (DPoP): the key's RFC 7638 SHA-256 thumbprint, base64url.",
        )
        listing = sub.add_parser("list", help="List tokens (never their secrets).")
        listing.add_argument("username", nargs="?")
        listing.add_argument("--all", action="store_true", help="Include revoked and expired tokens.")
        revoke = sub.add_parser("revoke", help="Revoke tokens by id; holds from the next request.")
        revoke.add_argument("ids", nargs="+", metavar="id")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, "_" + options["action"])(options)

    def _user(self, username: str) -> Any:
        model = get_user_model()
        try:
            return model._default_manager.get_by_natural_key(username)
        except model.DoesNotExist:
            raise CommandError(f"No user {username!r}.") from None

    def _create(self, options: dict[str, Any]) -> None:
        user = self._user(options["username"])
        expires = timezone.now() + options["expires"] if options["expires"] else None
        scopes = [s for scope in options["scope"] for s in scope.split()]
        handlers = [h for handler in options["handler"] for h in handler.split()]
        jkt = options["jkt"]
        if jkt and not (len(jkt) == 43 and all(c.isalnum() or c in "-_" for c in jkt)):
            raise CommandError("--jkt: a SHA-256 thumbprint is 43 base64url characters")
        token, text = MCPToken.objects.issue(
            user, options["name"], scopes=scopes, handlers=handlers, expires=expires, jkt=jkt
        )
        if options["verbosity"] > 1:
            self.stderr.write(f"Created {token.prefix} for {user.get_username()}; it is not shown again.")
        self.stdout.write(text)

    def _list(self, options: dict[str, Any]) -> None:
        tokens = MCPToken.objects.all()
        if not options["all"]:
            tokens = tokens.usable()
        tokens = tokens.select_related("user")
        if options["username"]:
            tokens = tokens.filter(user=self._user(options["username"]))
        for token in tokens.order_by("user_id", "created"):
            state = "revoked" if token.revoked else "expired" if token.is_expired else "active"
            self.stdout.write(
                "\t".join(
                    [
                        token.prefix,
                        token.user.get_username(),
                        token.name,
                        state,
                        f"expires={_when(token.expires, 'never')}",
                        f"last_used={_when(token.last_used, 'never')}",
                        f"scopes={token.scopes or '*'}",
                        f"handlers={token.handlers or '*'}",
                    ]
                )
            )

    def _revoke(self, options: dict[str, Any]) -> None:
        missing = []
        for prefix in options["ids"]:
            token = MCPToken.objects.filter(prefix=prefix).first()
            if token is None:
                missing.append(prefix)
                continue
            token.revoke()
            self.stdout.write(f"revoked {prefix}")
        if missing:
            raise CommandError(f"No token {', '.join(missing)}.")
