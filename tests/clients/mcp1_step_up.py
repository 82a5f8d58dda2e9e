"""The official Python SDK 1.x (run by tests/test_oauth_mcp1.py under its own virtualenv, `mcp==1.30.0`).

Signs in with OAuth, calls ``whoami``, then ``orders_list`` (which needs the ``shop`` scope: a
403 ``insufficient_scope`` sends the SDK back for consent). The person at the consent screen is
the test: each authorization URL is written to stdout as a JSON line, and the test answers on
stdin with the URL the authorization server redirected to. The outcome is the last JSON line.

    python mcp1_step_up.py URL
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


class Memory:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Consent:
    def __init__(self) -> None:
        self.redirect = ""

    async def open(self, url: str) -> None:
        say({"authorize": url})
        self.redirect = (await asyncio.to_thread(sys.stdin.readline)).strip()

    async def callback(self) -> tuple[str, str | None]:
        query = parse_qs(urlsplit(self.redirect).query)
        if "code" not in query:
            raise RuntimeError(f"consent refused: {self.redirect}")
        return query["code"][0], query.get("state", [None])[0]


async def main(url: str) -> None:
    storage, consent = Memory(), Consent()
    metadata = OAuthClientMetadata(
        client_name="mcp 1.x step-up test",
        redirect_uris=["http://127.0.0.1:9/callback"],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    auth = OAuthClientProvider(url, metadata, storage, redirect_handler=consent.open, callback_handler=consent.callback)
    outcome: dict[str, Any] = {}
    async with streamablehttp_client(url, auth=auth, timeout=30) as (read, write, _session_id):
        async with ClientSession(read, write) as session:
            await session.initialize()
            who = await session.call_tool("whoami", {})
            outcome["whoami"] = who.structuredContent
            orders = await session.call_tool("orders_list", {})
            outcome["orders_is_error"] = orders.isError
            outcome["orders"] = [block.model_dump(mode="json") for block in orders.content][:1]
    outcome["scope"] = storage.tokens.scope if storage.tokens else None
    outcome["access_token"] = storage.tokens.access_token if storage.tokens else None
    say({"done": outcome})


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1]))
    except BaseException as exc:  # the test reads the failure, not a hang
        say({"failed": f"{type(exc).__name__}: {exc!r}"[:4000]})
        raise
