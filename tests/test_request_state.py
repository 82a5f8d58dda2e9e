"""requestState sealing: every refusal reason, both algorithms, key rotation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_django import keyring, request_state
from mcp_django.conf import mcp_settings
from mcp_django.request_state import Claims, Reason, StateRefused, seal, unseal
from tests.conftest import Raw

BINDING = {"method": "tools/call", "target": "t", "principal": "p", "digest": "d", "audience": "https://a.example/mcp"}
KEY_A = "a" * 40
KEY_B = "b" * 40


def claims(**overrides: object) -> Claims:
    values = {**BINDING, "answers": {"k": {"q": "x", "a": {"action": "accept"}}}, "state": {"s": "1"}, "round": 2}
    values.update(overrides)
    return Claims(**values)  # type: ignore[arg-type]


def refused(token: str, **binding: object) -> Reason:
    with pytest.raises(StateRefused) as info:
        unseal(token, **{**BINDING, **binding})  # type: ignore[arg-type]
    assert info.value.code == -32602
    assert info.value.message == "the requestState is not valid"
    return info.value.reason


@pytest.fixture(params=[False, True], ids=["hmac", "aes-gcm"])
def algorithm(request: pytest.FixtureRequest):
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A, "ENCRYPT_REQUEST_STATE": request.param}):
        yield request.param


def test_round_trip_keeps_answers_state_and_round(algorithm: bool) -> None:
    token = seal(claims())
    back = unseal(token, **BINDING)
    assert back.answers == {"k": {"q": "x", "a": {"action": "accept"}}}
    assert back.state == {"s": "1"}
    assert back.round == 2
    assert back.expires_at - back.issued_at == mcp_settings.REQUEST_STATE_LIFETIME


def test_hmac_payload_is_readable_and_aes_payload_is_not(algorithm: bool) -> None:
    token = seal(claims(state={"secret": "swordfish"}))
    parts = token.split(".")
    if algorithm:
        assert len(parts) == 3
        assert b"swordfish" not in base64.urlsafe_b64decode(parts[2] + "==")
    else:
        assert len(parts) == 4
        assert b"swordfish" in base64.urlsafe_b64decode(parts[2] + "==")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("method", "prompts/get", Reason.WRONG_METHOD),
        ("target", "other_tool", Reason.WRONG_TARGET),
        ("principal", "someone-else", Reason.WRONG_PRINCIPAL),
        ("digest", "other-params", Reason.WRONG_PARAMS),
        ("audience", "https://b.example/mcp", Reason.WRONG_AUDIENCE),
        ("audience", "https://a.example/other/mcp", Reason.WRONG_AUDIENCE),
    ],
)
def test_binding_mismatches(algorithm: bool, field: str, value: str, reason: Reason) -> None:
    token = seal(claims())
    assert refused(token, **{field: value}) == reason


def test_bindings_that_are_not_ascii_are_compared_as_text() -> None:
    """ASCII bindings are compared as str; a target or an audience that is not ASCII is compared
    as UTF-8, and refused with the same reasons."""
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        binding = {**BINDING, "target": "café", "audience": "https://ça.example/mcp"}
        token = seal(claims(**binding))
        assert unseal(token, **binding).target == "café"  # type: ignore[arg-type]
        assert refused(token, target="cafe", audience=binding["audience"]) == Reason.WRONG_TARGET
        assert refused(token, target="café") == Reason.WRONG_AUDIENCE
        assert refused(token, **{**binding, "method": "prompts/get"}) == Reason.WRONG_METHOD
        assert refused(token, **{**binding, "principal": "pé"}) == Reason.WRONG_PRINCIPAL
        assert refused(token, **{**binding, "digest": "dé"}) == Reason.WRONG_PARAMS
        assert refused(seal(claims()), target="café") == Reason.WRONG_TARGET


def test_tampered_payload_and_mac(algorithm: bool) -> None:
    token = seal(claims())
    assert refused(token + "-TAMPERED") in (Reason.BAD_SIGNATURE, Reason.MALFORMED)
    parts = token.split(".")
    body = bytearray(base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4)))
    body[len(body) // 2] ^= 1
    parts[2] = base64.urlsafe_b64encode(bytes(body)).rstrip(b"=").decode()
    assert refused(".".join(parts)) == Reason.BAD_SIGNATURE


def test_expired(algorithm: bool) -> None:
    token = seal(claims(), now=time.time() - mcp_settings.REQUEST_STATE_LIFETIME - 1)
    assert refused(token) == Reason.EXPIRED


def test_too_large_is_refused_before_decoding(algorithm: bool) -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A, "MAX_REQUEST_STATE_BYTES": 100}):
        assert refused("v1." + "A" * 200) == Reason.TOO_LARGE


@pytest.mark.parametrize("token", ["", "v1", "v2.x.y.z", "v1..", "v1.kid.%%%.***", 12345, None, ["v1"]])
def test_malformed(algorithm: bool, token: object) -> None:
    assert refused(token) in (Reason.MALFORMED, Reason.UNKNOWN_KEY)  # type: ignore[arg-type]


def test_sealed_state_too_short_to_hold_its_nonce_and_tag_is_malformed() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A, "ENCRYPT_REQUEST_STATE": True}):
        head = seal(claims()).rsplit(".", 1)[0]
        short = base64.urlsafe_b64encode(b"x" * 20).rstrip(b"=").decode()
        assert refused(f"{head}.{short}") == Reason.MALFORMED


def test_unknown_key_and_rotation() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        old = seal(claims())
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_B}):
        assert refused(old) == Reason.UNKNOWN_KEY
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": [KEY_B, KEY_A]}):
        assert unseal(old, **BINDING).round == 2  # the old key still verifies
        fresh = seal(claims())
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_B}):
        assert unseal(fresh, **BINDING).round == 2  # and the new first key sealed it


def test_secret_key_derived_key_refuses_state_of_a_configured_key() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        token = seal(claims())
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": None}):
        assert (
            keyring.keyring().signing.kid
            == keyring.KeyRing(
                keyring.secrets_from_secret_key(settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS)
            ).signing.kid
        )
        assert refused(token) == Reason.UNKNOWN_KEY


def test_signed_with_a_key_but_sealed_mode_mismatch_is_malformed() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A, "ENCRYPT_REQUEST_STATE": False}):
        token = seal(claims())
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A, "ENCRYPT_REQUEST_STATE": True}):
        assert refused(token) == Reason.MALFORMED


# Sealed by the encoder before claims were a msgspec Struct (orjson over a hand-built dict),
# with KEY_A at 1_800_000_000: the format is unchanged, so states in flight during an upgrade open.
OLD_CLAIMS = {
    **BINDING,
    "round": 2,
    "answers": {"k": {"q": "x", "a": {"action": "accept", "content": {"n": 1.5, "é": [True, None]}}}},
    "asked": {"k2": "y"},
    "state": {"s": "1"},
}
OLD_ISSUED = 1_800_000_000
OLD_SIGNED = (
    "v1.B_bxTrF5.eyJtIjoidG9vbHMvY2FsbCIsInQiOiJ0IiwicCI6InAiLCJkIjoiZCIsInIiOjIsImEiOnsiayI6eyJxIjoieCIsImEiOnsiYWN0a"
    "W9uIjoiYWNjZXB0IiwiY29udGVudCI6eyJuIjoxLjUsIsOpIjpbdHJ1ZSxudWxsXX19fX0sInEiOnsiazIiOiJ5In0sInMiOnsicyI6IjEifSwiaW"
    "F0IjoxODAwMDAwMDAwLCJleHAiOjE4MDAwMDA2MDAsImF1ZCI6Imh0dHBzOi8vYS5leGFtcGxlL21jcCJ9.ylMYjC-nuhEYWFGFXJUmrZqluDt6RK"
    "EbLI3BZ05MxOQ"
)
OLD_SEALED = (
    "v1.B_bxTrF5.mGnPAxs9YgTt918bwUxC4l2eGzybETWtd8g8zaHY9bkcWFUpeYM8JzlYFSSmYJfpU7UKlP9nHNnXUcSZ3Xx0hc81eiweS9jblqYHRP"
    "uZQFfJ1Z4BIfeexVKOE-n033zxmKmgKeZOSsHH47v2XLwA7Ev4kV2m0ujB8poGr5K61oB9g1cVxJhIjj9h3u5p-cj8czdDWysNZ6FUUveSRGVxiGe8"
    "a4t3I_xyT2QxEvIKyBQaSrn2xo4xBxxcFMfpsEM2IRJjUEX8JylDGBAkQKM9WzehAqJITaBq5Pcfv4ZpPUJO39cqLxbilFvNOxjfh8hoL6jGer0V_"
    "VXAXw"
)


@pytest.mark.parametrize(("encrypt", "token"), [(False, OLD_SIGNED), (True, OLD_SEALED)], ids=["hmac", "aes-gcm"])
def test_states_sealed_by_the_previous_encoder_still_open(encrypt: bool, token: str) -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A, "ENCRYPT_REQUEST_STATE": encrypt}):
        back = unseal(token, **BINDING, now=OLD_ISSUED + 1)
        assert (back.round, back.answers, back.asked, back.state) == (2, OLD_CLAIMS["answers"], {"k2": "y"}, {"s": "1"})
        assert (back.issued_at, back.expires_at, back.audience) == (OLD_ISSUED, OLD_ISSUED + 600, BINDING["audience"])
        assert refused(token, now=OLD_ISSUED + 600) == Reason.EXPIRED
        if not encrypt:  # the same claims still make the same bytes
            assert seal(Claims(**OLD_CLAIMS), now=OLD_ISSUED) == token  # type: ignore[arg-type]


def _signed(payload: bytes) -> str:
    """A token over ``payload`` made by hand with KEY_A's MAC key: verified, whatever it says."""
    key = keyring.keyring().signing
    head = f"v1.{key.kid}.{keyring.b64encode(payload)}"
    return f"{head}.{keyring.b64encode(hmac.new(key.mac_key, head.encode(), hashlib.sha256).digest())}"


def _payload(**changes: object) -> bytes:
    data: dict[str, object] = {
        "m": "tools/call",
        "t": "t",
        "p": "p",
        "d": "d",
        "r": 1,
        "a": {"k": {"q": "x", "a": None}},
        "q": {},
        "s": {},
        "iat": int(time.time()),
        "exp": int(time.time()) + 60,
        "aud": BINDING["audience"],
    }
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not _DROP}).encode()


_DROP = object()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(_payload(aud=_DROP), id="no-audience"),
        pytest.param(_payload(exp=_DROP), id="no-expiry"),
        pytest.param(_payload(r=_DROP), id="no-round"),
        pytest.param(_payload(a=_DROP), id="no-answers"),
        pytest.param(_payload(r="1"), id="round-not-int"),
        pytest.param(_payload(r=True), id="round-bool"),
        pytest.param(_payload(exp=1e12), id="expiry-float"),
        pytest.param(_payload(iat="now"), id="issued-not-int"),
        pytest.param(_payload(m=1), id="method-not-str"),
        pytest.param(_payload(s={"k": 1}), id="state-not-str"),
        pytest.param(_payload(q={"k": 1}), id="asked-not-str"),
        pytest.param(_payload(a={"k": {"q": "x"}}), id="answer-without-a"),
        pytest.param(_payload(a={"k": {"a": 1}}), id="answer-without-q"),
        pytest.param(_payload(a={"k": "yes"}), id="answer-not-object"),
        pytest.param(_payload(a=[]), id="answers-not-object"),
        pytest.param(b"[1, 2]", id="array"),
        pytest.param(b"{", id="not-json"),
        pytest.param(b'{"m": "\xff"}', id="not-utf8"),
    ],
)
def test_verified_payloads_of_the_wrong_shape_are_malformed(payload: bytes) -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        assert unseal(_signed(_payload()), **BINDING).round == 1  # the hand-made token is a good one
        assert refused(_signed(payload)) == Reason.MALFORMED


def test_params_digest_ignores_round_fields_only() -> None:
    base = {"name": "t", "arguments": {"a": 1, "b": [1, 2]}}
    digest = request_state.params_digest(base)
    assert request_state.params_digest({**base, "_meta": {"x": 1}, "inputResponses": {}, "requestState": "s"}) == digest
    assert request_state.params_digest({"arguments": {"b": [1, 2], "a": 1}, "name": "t"}) == digest  # key order
    assert request_state.params_digest({**base, "arguments": {"a": 2, "b": [1, 2]}}) != digest
    for name in request_state._UNBOUND_PARAMS:  # every unbound param, and only those, is left out
        assert request_state.params_digest({**base, name: "x"}) == digest
    assert request_state.params_digest({**base, "task": {}}) != digest
    # The digest states in flight carry: the same as the release before gave these params.
    params = {"name": "t", "arguments": {"a": 1, "b": [1, 2], "é": "ü"}, "_meta": {"x": 1}, "task": {"ttl": 5}}
    assert request_state.params_digest(params) == "p1VSVjnD0GvwXoJ-3iwC27mAsPdPhbKS6hiH-_gq_s4"
    assert params["_meta"] == {"x": 1}  # the request's own params are left as they were


def _other_spellings(text: str) -> list[str]:
    """Spellings of the same bytes that differ in the last character's unused bits."""
    pad = "=" * (-len(text) % 4)
    data = base64.urlsafe_b64decode(text + pad)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    out = []
    for c in alphabet:
        candidate = text[:-1] + c
        if candidate != text and base64.urlsafe_b64decode(candidate + pad) == data:
            out.append(candidate)
    return out


def test_non_canonical_spellings_of_a_token_are_refused(algorithm: bool) -> None:
    for size in range(3):  # a payload length whose last character has unused bits
        token = seal(claims(state={"s": "x" * size}))
        alternatives = _other_spellings(token.rsplit(".", 1)[1])
        if alternatives:
            break
    assert alternatives  # HMAC: 3 more spellings of the MAC; AES-GCM: 3 or 15 of the sealed bytes
    assert unseal(token, **BINDING).round == 2
    for alternative in alternatives:
        assert refused(token.rsplit(".", 1)[0] + "." + alternative) == Reason.MALFORMED


def test_another_spelling_of_a_signed_payload_fails_its_mac() -> None:
    """The payload is decoded without the canonical-spelling check only once the MAC has verified
    its text: another spelling of the same bytes is another text, and its MAC fails."""
    with override_settings(MCP_DJANGO={**settings.MCP_DJANGO, "ENCRYPT_REQUEST_STATE": False}):
        for size in range(3):
            token = seal(claims(state={"s": "x" * size}))
            version, kid, payload, mac = token.split(".")
            alternatives = _other_spellings(payload)
            if alternatives:
                break
        assert alternatives
        assert unseal(token, **BINDING).round == 2
        for alternative in alternatives:
            assert refused(f"{version}.{kid}.{alternative}.{mac}") == Reason.BAD_SIGNATURE


def test_rotation_keeps_the_principal_of_states_sealed_with_the_old_key() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        old_digest = keyring.principal_digests("auth.user:1")[0]
        token = seal(claims(principal=old_digest))
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": [KEY_B, KEY_A]}):
        digests = keyring.principal_digests("auth.user:1")
        assert digests[0] != old_digest and old_digest in digests  # new states name it with the new key
        assert unseal(token, **{**BINDING, "principal": digests}).round == 2
        other = keyring.principal_digests("auth.user:2")
        with pytest.raises(StateRefused) as info:
            unseal(token, **{**BINDING, "principal": other})
        assert info.value.reason == Reason.WRONG_PRINCIPAL


def test_legacy_session_ids_verify_under_every_key_and_only_canonically() -> None:
    from mcp_django.protocol import legacy

    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        record = legacy.read_initialize({"protocolVersion": "2025-11-25"}, "digest")
        sid = legacy.seal_session(record)
        assert legacy.open_session(sid) == record
        for alternative in _other_spellings(sid.rsplit(".", 1)[1]):
            assert legacy.open_session(sid.rsplit(".", 1)[0] + "." + alternative) is None
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": [KEY_B, KEY_A]}):
        assert legacy.open_session(sid) == record
        fresh = legacy.seal_session(record)
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        assert legacy.open_session(fresh) is None  # sealed with the new key
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_B}):
        assert legacy.open_session(sid) is None and legacy.open_session(fresh) == record


def test_a_legacy_session_id_with_another_payload_under_its_mac_is_refused() -> None:
    from mcp_django.keyring import b64encode
    from mcp_django.protocol import legacy

    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        sid = legacy.seal_session(legacy.read_initialize({"protocolVersion": "2025-11-25"}, "digest"))
        other = legacy.seal_session(legacy.read_initialize({"protocolVersion": "2025-11-25"}, "another digest"))
        prefix, kid, _payload, mac = sid.split(".")
        assert legacy.open_session(f"{prefix}.{kid}.{other.split('.')[2]}.{mac}") is None
        assert legacy.open_session(f"{prefix}.{kid}.{b64encode(b'{}')}.{mac}") is None


def test_a_legacy_session_id_leaves_out_an_oversized_client_info() -> None:
    from mcp_django.protocol import legacy

    params = {"protocolVersion": "2025-11-25", "clientInfo": {"name": "big", "version": "1", "notes": "x" * 2000}}
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        record = legacy.read_initialize(params, "digest")
        opened = legacy.open_session(legacy.seal_session(record))
    assert opened is not None and opened.sid == record.sid and opened.client_info is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (None, "initialize needs params"),
        (["2025-11-25"], "initialize needs params"),
        ({"capabilities": {}}, "params.protocolVersion must be a string"),
        ({"protocolVersion": 20251125}, "params.protocolVersion must be a string"),
        ({"protocolVersion": "2025-11-25", "capabilities": []}, "params.capabilities must be an object"),
    ],
)
def test_malformed_initialize_params_are_invalid_params(params: object, message: str) -> None:
    from mcp_django.protocol import legacy
    from mcp_django.protocol.jsonrpc import InvalidParams

    with pytest.raises(InvalidParams) as info:
        legacy.read_initialize(params, "digest")
    assert info.value.message == message


# -- the audience: a state is accepted only by the endpoint that issued it --------------------

FLOW = "test_input_required_result_elicitation"
ADA = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}


def _state_refusals() -> list[str]:
    from mcp_django import audit
    from mcp_django.models import AuditEvent, Kind

    audit.flush()
    return [row.reason for row in AuditEvent.objects.filter(kind=Kind.STATE_REFUSED).order_by("id")]


@pytest.mark.django_db(transaction=True)
def test_two_deployments_sharing_a_key_refuse_each_others_states(raw: Raw) -> None:
    """RESOURCE_URL names each deployment; the key is the same: a state crosses neither way."""
    one, other = "https://one.example/mcp", "https://other.example/mcp"
    with override_settings(MCP_DJANGO={**settings.MCP_DJANGO, "RESOURCE_URL": one}):
        state = raw.call(FLOW).json()["result"]["requestState"]
    with override_settings(MCP_DJANGO={**settings.MCP_DJANGO, "RESOURCE_URL": other}):
        crossed = raw.call(FLOW, inputResponses=ADA, requestState=state)
        assert crossed.status_code == 400 and crossed.json()["error"]["code"] == -32602
        assert _state_refusals() == [Reason.WRONG_AUDIENCE]
        own = raw.call(FLOW).json()["result"]["requestState"]
        done = raw.call(FLOW, inputResponses=ADA, requestState=own)
        assert done.json()["result"]["content"][0]["text"] == "Hello, Ada!"
    with override_settings(MCP_DJANGO={**settings.MCP_DJANGO, "RESOURCE_URL": one}):
        back = raw.call(FLOW, inputResponses=ADA, requestState=own)
        assert back.json()["error"]["code"] == -32602
        done = raw.call(FLOW, inputResponses=ADA, requestState=state)
        assert done.json()["result"]["content"][0]["text"] == "Hello, Ada!"
    assert _state_refusals() == [Reason.WRONG_AUDIENCE, Reason.WRONG_AUDIENCE]


@pytest.mark.django_db(transaction=True)
def test_without_resource_url_a_state_is_bound_to_the_url_it_was_issued_at(raw: Raw) -> None:
    port = raw.url.split(":")[2].split("/")[0]
    state = raw.call(FLOW).json()["result"]["requestState"]
    moved = raw.call(FLOW, inputResponses=ADA, requestState=state, headers={"host": f"localhost:{port}"})
    assert moved.json()["error"]["code"] == -32602
    assert _state_refusals() == [Reason.WRONG_AUDIENCE]
    same = raw.call(FLOW, inputResponses=ADA, requestState=state)
    assert same.json()["result"]["content"][0]["text"] == "Hello, Ada!"


def test_with_resource_url_a_round_builds_no_django_request(
    raw_inprocess: Raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The configured URL is the audience whatever the request says: binding a state to it needs
    nothing of Django's request, which is then not built (it costs a round more than its sealing)."""
    from django.core.handlers.asgi import ASGIRequest

    built: list[str] = []
    original = ASGIRequest.__init__

    def counting(self: ASGIRequest, scope: dict, body_file: object) -> None:  # type: ignore[type-arg]
        built.append(scope["path"])
        original(self, scope, body_file)

    monkeypatch.setattr(ASGIRequest, "__init__", counting)
    # Untraced, whatever tracer provider an earlier test of this process set: a span reads the
    # caller's trace context from the request's headers, which builds Django's request.
    from mcp_django import tracing

    monkeypatch.setattr(tracing, "_configured", lambda: False)
    with override_settings(MCP_DJANGO={**settings.MCP_DJANGO, "RESOURCE_URL": "https://one.example/mcp/"}):
        state = raw_inprocess.call(FLOW).json()["result"]["requestState"]
        assert request_state._decoder.decode(request_state.decode_token(state)).audience == "https://one.example/mcp"
        done = raw_inprocess.call(FLOW, inputResponses=ADA, requestState=state)
        assert done.json()["result"]["content"][0]["text"] == "Hello, Ada!"
    assert built == []
    # Without it, the URL the request reached is the audience, and Django's request says which:
    # once for each URL (the scheme, path, Host and proxy headers), until a setting changes.
    state = raw_inprocess.call(FLOW).json()["result"]["requestState"]
    assert request_state._decoder.decode(request_state.decode_token(state)).audience == "http://testserver/mcp"
    assert built == ["/mcp"]
    done = raw_inprocess.call(FLOW, inputResponses=ADA, requestState=state)
    assert done.json()["result"]["content"][0]["text"] == "Hello, Ada!"
    assert built == ["/mcp"]
    moved = raw_inprocess.call(FLOW, inputResponses=ADA, requestState=state, headers={"host": "localhost"})
    assert moved.json()["error"]["code"] == -32602  # bound to testserver, not localhost
    assert built == ["/mcp", "/mcp"]
    other = raw_inprocess.call(FLOW, headers={"host": "localhost"}).json()["result"]["requestState"]
    assert request_state._decoder.decode(request_state.decode_token(other)).audience == "http://localhost/mcp"
    assert built == ["/mcp", "/mcp"]
    with override_settings(USE_X_FORWARDED_HOST=True):
        # A proxy header Django now reads: another URL, which Django's request names.
        forwarded = raw_inprocess.call(FLOW, headers={"x-forwarded-host": "localhost"}).json()["result"]
        assert request_state._decoder.decode(request_state.decode_token(forwarded["requestState"])).audience == (
            "http://localhost/mcp"
        )
        assert built == ["/mcp", "/mcp", "/mcp"]
