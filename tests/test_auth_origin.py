"""The Origin check compares the whole origin, scheme included, as Django's CSRF check does."""

from __future__ import annotations

import pytest
import websockets
from django.test import override_settings

from tests.conftest import Raw, mcp_settings

pytestmark = pytest.mark.django_db(transaction=True)


def _discover(raw: Raw, origin: str, **headers: str):  # type: ignore[no-untyped-def]
    return raw.post("server/discover", headers={"origin": origin, **headers})


def test_an_origin_with_another_scheme_is_refused_and_never_echoed(raw: Raw) -> None:
    host = raw.url.split("/")[2]
    for scheme in ("ftp", "https", "file", "chrome-extension", "ws"):
        refused = _discover(raw, f"{scheme}://{host}")
        assert refused.status_code == 403, scheme
        assert "access-control-allow-origin" not in refused.headers
    own = _discover(raw, f"http://{host}")
    assert own.status_code == 200 and "access-control-allow-origin" not in own.headers


def test_behind_a_tls_proxy_the_origin_is_compared_with_the_scheme_django_sees(raw: Raw) -> None:
    host = raw.url.split("/")[2]
    with override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")):
        proxied = {"x-forwarded-proto": "https"}
        assert _discover(raw, f"https://{host}", **proxied).status_code == 200
        assert _discover(raw, f"http://{host}", **proxied).status_code == 403
        assert _discover(raw, f"http://{host}").status_code == 200  # no header: the transport's own


def test_listed_origins_are_matched_whole(raw: Raw) -> None:
    with mcp_settings(ALLOWED_ORIGINS=["https://app.example.com"]):
        listed = _discover(raw, "https://app.example.com")
        assert listed.status_code == 200
        assert listed.headers["access-control-allow-origin"] == "https://app.example.com"
        # A browser's DPoP client sends its proof and reads the challenge and the nonce.
        assert "dpop" in listed.headers["access-control-allow-headers"].split(", ")
        exposed = listed.headers["access-control-expose-headers"].split(", ")
        assert {"www-authenticate", "dpop-nonce", "mcp-session-id"} <= set(exposed)
        assert _discover(raw, "http://app.example.com").status_code == 403
        assert _discover(raw, "ftp://app.example.com").status_code == 403


@pytest.mark.anyio
async def test_a_websocket_upgrade_from_another_scheme_is_refused(live_url: str) -> None:
    ws_url = live_url.replace("http://", "ws://")
    host = live_url.split("/")[2]
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(ws_url, subprotocols=["mcp"], additional_headers={"Origin": f"ftp://{host}"}):
            pass
    assert refused.value.response.status_code == 403
    async with websockets.connect(ws_url, subprotocols=["mcp"], additional_headers={"Origin": f"http://{host}"}):
        pass
