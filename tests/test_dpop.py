"""DPoP (RFC 9449) at the resource server: bound tokens, each proof's checks, both eras, websockets.

The DPoP client is tests/dpop_client.py (jwcrypto): the official Python SDK's client carries
its proofs through an httpx2 auth, and raw requests carry hand-made ones for each refusal.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import httpx
import httpx2
import mcp.types as types
import pytest
import websockets
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_django.contrib import dpop
from mcp_django.tokens.models import BoundAccessToken, MCPToken
from tests.conftest import MODERN, mcp_settings, meta
from tests.dpop_client import DPoPAuth, DPoPKey
from tests.test_oauth import _token

pytestmark = pytest.mark.django_db(transaction=True)

LEGACY = "2025-11-25"


def _bound(live_url: str, key: DPoPKey, username: str = "dora") -> str:
    """An OAuth access token for /mcp, bound to ``key`` as the demo's authorization server binds it."""
    user = get_user_model().objects.get_or_create(username=username)[0]
    token = _token(user, resource=[live_url])
    BoundAccessToken.bind(token.token, key.jkt, token.expires)
    return str(token.token)


def _request(
    url: str, era: str, authorization: str, proof: str | None, method: str = "POST", extra: dict[str, str] | None = None
) -> httpx.Response:
    """One request of ``era``: a 2026-07-28 tools/call of whoami, or a legacy initialize (with
    the ``extra`` headers a proxy adds)."""
    if era == MODERN:
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "whoami", "arguments": {}, "_meta": meta()},
        }
        headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "whoami"}
    else:
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
        headers = {}
    headers |= {"accept": "application/json, text/event-stream", "authorization": authorization}
    if proof is not None:
        headers["dpop"] = proof
    return httpx.request(method, url, json=body, headers={**headers, **(extra or {})}, timeout=30)


def _challenge(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    return response.headers["www-authenticate"]


def _refused_with(response: httpx.Response, error: str, why: str) -> None:
    challenge = _challenge(response)
    assert f'error="{error}"' in challenge and why in challenge, challenge
    # The error is the DPoP challenge's, which names the algorithms a proof may use.
    assert challenge[challenge.index("DPoP ") :].count(f'error="{error}"') == 1, challenge
    assert 'algs="ES256 ES384 EdDSA PS256 RS256"' in challenge


# -- a real client ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_client_with_a_bound_token_calls_a_tool_that_asks(live_url: str, mode: str) -> None:
    key = DPoPKey()
    token = await anyio.to_thread.run_sync(_bound, live_url, key)
    asked: list[str] = []

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    auth = DPoPAuth(key, token)
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="required"):
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=60)) as http:
            async with Client(
                streamable_http_client(live_url, http_client=http),
                mode=mode,
                cache=None,
                elicitation_callback=on_elicit,
            ) as client:
                who = await client.call_tool("whoami")
                cleared = await client.call_tool("clear_cache", {"region": "eu"})
    assert who.structured_content["username"] == "dora"
    assert cleared.content[0].text == "Cleared the eu cache."
    assert asked == ["Clear the eu cache?"]
    assert auth.proofs >= 3  # one proof per request, each accepted once


@pytest.mark.anyio
async def test_the_sdk_client_follows_the_servers_nonce(live_url: str) -> None:
    key = DPoPKey(kty="OKP", alg="EdDSA")
    token = await anyio.to_thread.run_sync(_bound, live_url, key)
    auth = DPoPAuth(key, token)
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="required", DPOP_NONCE_SECONDS=60):
        async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
            async with Client(streamable_http_client(live_url, http_client=http), mode=MODERN, cache=None) as client:
                who = await client.call_tool("whoami")
        assert auth.nonce and dpop.nonce_valid(auth.nonce)
    assert who.structured_content["username"] == "dora"


# -- each check of a proof, on both eras ----------------------------------------------------------------


@pytest.mark.parametrize("era", [MODERN, LEGACY])
def test_each_bad_proof_is_refused_with_the_rfcs_error(live_url: str, era: str) -> None:
    key = DPoPKey()
    token = _bound(live_url, key)
    auth = f"DPoP {token}"
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="allowed"):
        good = _request(live_url, era, auth, key.proof("POST", live_url, token))
        assert good.status_code == 200, good.text
        # The same URL written another way (case, default port elided or not) is the same URL.
        scheme, rest = live_url.split("://", 1)
        host, path = rest.split("/", 1)
        upper = key.proof("POST", f"{scheme.upper()}://{host.upper()}/{path}?x=1", token)
        assert _request(live_url, era, auth, upper).status_code == 200
        assert _request(live_url, era, auth, key.proof("POST", f"{live_url}?q=1#f", token)).status_code == 200

        _refused_with(_request(live_url, era, auth, None), "invalid_dpop_proof", "needs a DPoP proof")
        bearer = _request(live_url, era, f"Bearer {token}", None)
        assert 'error="invalid_token"' in _challenge(bearer) and "DPoP-bound" in _challenge(bearer)
        other_url = key.proof("POST", live_url.replace("/mcp", "/staff/mcp"), token)
        _refused_with(_request(live_url, era, auth, other_url), "invalid_dpop_proof", "htu")
        other_method = key.proof("GET", live_url, token)
        _refused_with(_request(live_url, era, auth, other_method), "invalid_dpop_proof", "htm")
        replayed = key.proof("POST", live_url, token)
        assert _request(live_url, era, auth, replayed).status_code == 200
        _refused_with(_request(live_url, era, auth, replayed), "invalid_dpop_proof", "used before")
        stale = key.proof("POST", live_url, token, iat=time.time() - 301)
        _refused_with(_request(live_url, era, auth, stale), "invalid_dpop_proof", "iat")
        future = key.proof("POST", live_url, token, iat=time.time() + 330)
        _refused_with(_request(live_url, era, auth, future), "invalid_dpop_proof", "iat")
        other_key = DPoPKey().proof("POST", live_url, token)
        _refused_with(_request(live_url, era, auth, other_key), "invalid_dpop_proof", "not signed by the key")
        other_token = key.proof("POST", live_url, token + "x")
        _refused_with(_request(live_url, era, auth, other_token), "invalid_dpop_proof", "ath")
        no_ath = key.proof("POST", live_url)
        _refused_with(_request(live_url, era, auth, no_ath), "invalid_dpop_proof", "ath")
        typ = key.proof("POST", live_url, token, header={"typ": "JWT"})
        _refused_with(_request(live_url, era, auth, typ), "invalid_dpop_proof", "typ")
        two = f"{key.proof('POST', live_url, token)}, {key.proof('POST', live_url, token)}"
        _refused_with(_request(live_url, era, auth, two), "invalid_dpop_proof", "exactly one")
        # Signed, but not as the header says: another key than its jwk, or no signature at all.
        forged = key.proof("POST", live_url, token, header={"jwk": DPoPKey().key.export_public(as_dict=True)})
        _refused_with(_request(live_url, era, auth, forged), "invalid_dpop_proof", "not a JWT signed by its jwk")
        head, body, _signature = key.proof("POST", live_url, token).split(".")
        _refused_with(_request(live_url, era, auth, f"{head}.{body}."), "invalid_dpop_proof", "not a JWT")


def test_only_asymmetric_algorithms_and_public_keys_are_taken(live_url: str) -> None:
    from jwcrypto.jwk import JWK

    key = DPoPKey()
    token = _bound(live_url, key)
    auth = f"DPoP {token}"
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="allowed"):
        # A MAC: the "public" key would be the secret itself.
        mac = DPoPKey()
        mac.key, mac.alg = JWK.generate(kty="oct", size=256), "HS256"
        hs = mac.proof("POST", live_url, token, header={"jwk": mac.key.export(as_dict=True)})
        _refused_with(_request(live_url, MODERN, auth, hs), "invalid_dpop_proof", "alg")
        # An algorithm the endpoint does not list.
        with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="allowed", DPOP_ALGORITHMS=["EdDSA"]):
            refused = _request(live_url, MODERN, auth, key.proof("POST", live_url, token))
            assert 'error="invalid_dpop_proof"' in _challenge(refused) and "alg" in _challenge(refused)
        # A private key in the header.
        private = key.proof("POST", live_url, token, header={"jwk": key.key.export_private(as_dict=True)})
        _refused_with(_request(live_url, MODERN, auth, private), "invalid_dpop_proof", "public key")


def test_a_nonce_is_asked_for_and_checked(live_url: str) -> None:
    key = DPoPKey()
    token = _bound(live_url, key)
    auth = f"DPoP {token}"
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="required", DPOP_NONCE_SECONDS=60):
        asked = _request(live_url, MODERN, auth, key.proof("POST", live_url, token))
        _refused_with(asked, "use_dpop_nonce", "nonce")
        nonce = asked.headers["dpop-nonce"]
        forged = key.proof("POST", live_url, token, nonce=nonce[:-2] + ("AA" if nonce[-2:] != "AA" else "BB"))
        assert _request(live_url, MODERN, auth, forged).headers.get("dpop-nonce")
        assert _request(live_url, MODERN, auth, key.proof("POST", live_url, token, nonce=nonce)).status_code == 200
        # An old period's nonce is stale.
        old = dpop.new_nonce(time.time() - 180)
        _refused_with(
            _request(live_url, MODERN, auth, key.proof("POST", live_url, token, nonce=old)), "use_dpop_nonce", ""
        )


# -- the endpoint's setting, and tokens that are not bound ---------------------------------------------------


def test_required_allowed_and_off(live_url: str) -> None:
    key = DPoPKey()
    bound = _bound(live_url, key)
    user = get_user_model().objects.get(username="dora")
    plain = str(_token(user, resource=[live_url]).token)
    origin = live_url.rsplit("/mcp", 1)[0]
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="required"):
        refused = _request(live_url, MODERN, f"Bearer {plain}", None)
        challenge = _challenge(refused)
        assert challenge.startswith('DPoP realm="mcp", error="invalid_token"') and "only DPoP-bound" in challenge
        assert f'resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp"' in challenge
        anonymous = _challenge(_request(live_url, MODERN, "", None))
        assert anonymous.startswith("DPoP ") and "Bearer" not in anonymous
        metadata = httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp").json()
        assert metadata["dpop_bound_access_tokens_required"] is True
        assert metadata["dpop_signing_alg_values_supported"] == ["ES256", "ES384", "EdDSA", "PS256", "RS256"]
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="allowed"):
        assert _request(live_url, MODERN, f"Bearer {plain}", None).status_code == 200
        # An unbound token sent as DPoP: its proof would bind nothing.
        unbound = _request(live_url, MODERN, f"DPoP {plain}", key.proof("POST", live_url, plain))
        assert 'error="invalid_token"' in _challenge(unbound) and "not DPoP-bound" in _challenge(unbound)
        both = _challenge(_request(live_url, MODERN, "", None))
        assert both.startswith('Bearer realm="mcp"') and ', DPoP realm="mcp"' in both
        metadata = httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp").json()
        assert metadata["dpop_bound_access_tokens_required"] is False
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="off"):
        # A bound token is never a bearer token, even where the endpoint takes no DPoP.
        assert 'error="invalid_token"' in _challenge(_request(live_url, MODERN, f"Bearer {bound}", None))
        assert _request(live_url, MODERN, f"DPoP {bound}", key.proof("POST", live_url, bound)).status_code == 401
        assert (
            "dpop_signing_alg_values_supported"
            not in httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp").json()
        )


def test_an_mcp_token_may_be_bound_to_a_key(live_url: str) -> None:
    key = DPoPKey()
    user = get_user_model().objects.create_user("mia")
    _row, token = MCPToken.objects.issue(user, "agent", jkt=key.jkt)
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="allowed"):
        accepted = _request(live_url, MODERN, f"DPoP {token}", key.proof("POST", live_url, token))
        assert accepted.status_code == 200 and accepted.json()["result"]["structuredContent"]["username"] == "mia"
        bearer = _request(live_url, MODERN, f"Bearer {token}", None)
        assert 'error="invalid_token"' in _challenge(bearer)
        _refused_with(
            _request(live_url, MODERN, f"DPoP {token}", DPoPKey().proof("POST", live_url, token)),
            "invalid_dpop_proof",
            "not signed by the key",
        )


def test_behind_a_proxy_the_url_is_the_one_the_client_used(live_url: str) -> None:
    key = DPoPKey()
    token = _bound(live_url, key)
    public = "https://shop.example/mcp"
    with (
        mcp_settings(ALLOW_ANONYMOUS=False, DPOP="allowed", RESOURCE_URL=public),
        _proxy_settings(),
    ):
        from oauth2_provider.models import AccessToken

        AccessToken.objects.filter(token_checksum=dpop.token_checksum(token)).update(resource=[public])
        headers = {"x-forwarded-proto": "https", "x-forwarded-host": "shop.example"}
        accepted = _request(live_url, MODERN, f"DPoP {token}", key.proof("POST", public, token), extra=headers)
        assert accepted.status_code == 200, accepted.text
        # The address the proxy reached the server at is not the URL the client signed.
        refused = _request(live_url, MODERN, f"DPoP {token}", key.proof("POST", live_url, token), extra=headers)
        assert 'error="invalid_dpop_proof"' in _challenge(refused) and "htu" in _challenge(refused)


def _proxy_settings() -> Any:
    from django.test import override_settings

    return override_settings(
        SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"),
        USE_X_FORWARDED_HOST=True,
        ALLOWED_HOSTS=["127.0.0.1", "shop.example"],
    )


# -- websockets: the proof at the upgrade, the binding held ----------------------------------------------------


async def _socket(
    url: str, headers: dict[str, str], messages: int = 2, pause: float = 0.0
) -> tuple[int, str, list[Any]]:
    """(status, challenge, answers): initialize, then ``messages - 1`` whoami calls ``pause`` seconds apart."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    answers = []
    try:
        async with websockets.connect(url, subprotocols=["mcp"], additional_headers=headers) as socket:
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
            answers.append(json.loads(await socket.recv()))
            for n in range(1, messages):
                await anyio.sleep(pause)
                call = {"name": "whoami", "arguments": {}}
                await socket.send(json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call}))
                answers.append(json.loads(await socket.recv()))
    except websockets.InvalidStatus as refused:
        return refused.response.status_code, refused.response.headers.get("www-authenticate", ""), []
    return 101, "", answers


def test_a_websocket_checks_the_proof_at_the_upgrade_and_holds_the_binding(live_url: str) -> None:
    key = DPoPKey()
    token = _bound(live_url, key)
    ws = live_url.replace("http://", "ws://")
    auth = {"Authorization": f"DPoP {token}"}
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="required", DPOP_PROOF_WINDOW=4):
        # Messages go on past the proof's window: the socket holds the token and key it proved.
        proof = key.proof("GET", ws, token)
        status, _, answers = anyio.run(_socket, ws, {**auth, "DPoP": proof}, 3, 2.2)
        assert status == 101 and [a["result"]["structuredContent"]["username"] for a in answers[1:]] == ["dora"] * 2
        # The upgrade's URL may be signed as the http URL it began as.
        used = key.proof("GET", live_url, token)
        status, _, _ = anyio.run(_socket, ws, {**auth, "DPoP": used})
        assert status == 101
        refusals = {
            "no proof": ({}, "needs a DPoP proof"),
            "replayed": ({"DPoP": used}, "used before"),
            "another key": ({"DPoP": DPoPKey().proof("GET", ws, token)}, "not signed by the key"),
            "another method": ({"DPoP": key.proof("POST", ws, token)}, "htm"),
            "another URL": ({"DPoP": key.proof("GET", ws + "x", token)}, "htu"),
            "stale": ({"DPoP": key.proof("GET", ws, token, iat=time.time() - 10)}, "iat"),
        }
        for name, (extra, why) in refusals.items():
            status, challenge, _ = anyio.run(_socket, ws, {**auth, **extra})
            assert status == 401 and 'error="invalid_dpop_proof"' in challenge and why in challenge, name
        status, challenge, _ = anyio.run(_socket, ws, {"Authorization": f"Bearer {token}"})
        assert status == 401 and 'error="invalid_token"' in challenge


def test_a_websocket_whose_token_is_revoked_ends(live_url: str) -> None:
    """The held binding is for the proof only: the token itself is checked on every message."""
    from oauth2_provider.models import AccessToken

    key = DPoPKey()
    token = _bound(live_url, key)
    ws = live_url.replace("http://", "ws://")

    async def run() -> list[Any]:
        headers = {"Authorization": f"DPoP {token}", "DPoP": key.proof("GET", ws, token)}
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        out = []
        async with websockets.connect(ws, subprotocols=["mcp"], additional_headers=headers) as socket:
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
            out.append(json.loads(await socket.recv()))
            await anyio.to_thread.run_sync(
                lambda: AccessToken.objects.filter(token_checksum=dpop.token_checksum(token)).delete()
            )
            await anyio.sleep(1.1)  # past the principal cache's second
            call = {"name": "whoami", "arguments": {}}
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}))
            try:
                out.append(json.loads(await socket.recv()))
            except websockets.ConnectionClosed as closed:
                out.append(closed.rcvd.code if closed.rcvd else None)
        return out

    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="required"):
        answers = anyio.run(run)
    assert "result" in answers[0]
    assert not (isinstance(answers[1], dict) and "result" in answers[1]), answers


# -- pieces -------------------------------------------------------------------------------------------------


def test_htu_normal_form() -> None:
    assert dpop.normalized_url("HTTPS://Shop.Example:443/mcp?x=1#y") == "https://shop.example/mcp"
    assert dpop.normalized_url("http://shop.example:80") == "http://shop.example/"
    assert dpop.normalized_url("wss://shop.example/mcp") == "https://shop.example/mcp"
    assert dpop.normalized_url("http://[::1]:8000/mcp") == "http://[::1]:8000/mcp"
    for bad in ("urn:x", "https://u@shop.example/", "ftp://shop.example/", "http://h:x/"):
        assert dpop.normalized_url(bad) is None, bad


def test_a_malformed_proof_is_refused_before_its_claims_are_used() -> None:
    # In process, the checks a client's hand-made proof can fail that the live tests above do not send.
    from django.test import RequestFactory
    from jwcrypto.jws import JWS

    url = "http://testserver/mcp"
    request = RequestFactory().post("/mcp")
    key = DPoPKey()

    def signed(payload: Any) -> str:
        jws = JWS(json.dumps(payload))
        protected = {"typ": "dpop+jwt", "alg": key.alg, "jwk": key.key.export_public(as_dict=True)}
        jws.add_signature(key.key, alg=key.alg, protected=json.dumps(protected))
        return str(jws.serialize(compact=True))

    refusals = [
        ("a.b", "not a JWT signed by its jwk"),
        (key.proof("POST", url, header={"jwk": "a key"}), "header has no jwk"),
        (signed(["POST", url]), "payload is not a JSON object"),
        (key.proof("POST", url, claims={"jti": 7}), "needs a jti"),
        (key.proof("POST", url, claims={"jti": "j" * (dpop.MAX_JTI_CHARS + 1)}), "needs a jti"),
        (key.proof("POST", url, claims={"htu": 7}), "htu is not this request's URL"),
        (key.proof("POST", url, claims={"iat": True}), "needs an iat"),
        (key.proof("POST", url, claims={"iat": "now"}), "needs an iat"),
    ]
    for proof, why in refusals:
        with pytest.raises(dpop.ProofRefused) as refused:
            dpop.verify(request, proof)
        assert refused.value.error == dpop.INVALID_PROOF
        assert why in refused.value.description, (proof, refused.value.description)
    # The same proof made well passes: each refusal above was the flaw's.
    assert dpop.verify(request, key.proof("POST", url)) == key.jkt


def test_settings_refuse_symmetric_algorithms() -> None:
    from mcp_django.conf import InvalidSetting, dpop_algorithms

    assert dpop_algorithms(["ES256"]) == ["ES256"]
    for bad in (["HS256"], ["none"], [], "ES256"):
        with pytest.raises(InvalidSetting):
            dpop_algorithms(bad)


def test_a_bound_token_without_a_scope_is_told_so_in_its_own_scheme(live_url: str) -> None:
    key = DPoPKey()
    token = _bound(live_url, key)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "orders_list", "arguments": {}, "_meta": meta()},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "orders_list",
        "authorization": f"DPoP {token}",
        "dpop": key.proof("POST", live_url, token),
    }
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="allowed"):
        refused = httpx.post(live_url, json=body, headers=headers, timeout=30)
    assert refused.status_code == 403
    challenge = refused.headers["www-authenticate"]
    bearer, proof = challenge.split(", DPoP ", 1)
    assert 'error="insufficient_scope"' in proof and "error=" not in bearer, challenge


def test_dpop_without_jwcrypto_is_a_check_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from mcp_django import checks

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jwcrypto" else found(name, *a))
    with mcp_settings(DPOP="required"):
        errors = checks.check_dpop()
    assert [error.id for error in errors] == ["mcp_django.E060"] and "'required'" in errors[0].msg
    with mcp_settings(DPOP="off"):
        assert checks.check_dpop() == []
