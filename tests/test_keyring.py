"""The keys derived from REQUEST_STATE_KEY: fixed derivations, one key per use, rotation."""

from __future__ import annotations

from django.test import override_settings

from mcp_django import keyring
from mcp_django.keyring import KeyRing

KEY_A = "a" * 40
KEY_B = "b" * 40


def test_derivations_are_those_tokens_were_issued_under() -> None:
    # Known answers: a change here would end every requestState and legacy session
    # issued before an upgrade, so it must be deliberate (new info strings, a new version).
    key = KeyRing([KEY_A.encode()]).signing
    assert key.kid == "B_bxTrF5"
    assert key.mac_key.hex() == "3554a27248d6ec04504ce39019b8c17a48e5821a8c2fd45d4b5f20411cd1677e"
    assert key.session_key.hex() == "e5e823295dfa8b095ed9ae7d93267ee15fe99663b723a4ee38985b387d2c665f"
    assert key.aead.encrypt(b"\0" * 12, b"x", b"").hex() == "2abdab485918304049b6cdddc4f9593d9d"
    principal_key = KeyRing([KEY_A.encode()]).principal_keys[0]
    assert principal_key.hex() == "577b9fc586d8d39d02dd4a4d32cbb1232851165686520312fbfeb111c0e4a6de"


def test_every_use_has_a_key_of_its_own() -> None:
    ring = KeyRing([KEY_A.encode(), KEY_B.encode()])
    material = [k.mac_key for k in ring.keys] + [k.session_key for k in ring.keys] + ring.principal_keys
    assert len(set(material)) == len(material) == 6
    assert ring.signing is ring.keys[0] and set(ring.by_kid) == {k.kid for k in ring.keys}


def test_the_ring_follows_the_setting() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        first = keyring.keyring()
        assert keyring.keyring() is first and not first.ephemeral
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": [KEY_B, KEY_A]}):
        rotated = keyring.keyring()
        assert rotated.signing.kid != first.signing.kid and first.signing.kid in rotated.by_kid
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": None}):
        assert keyring.keyring().ephemeral


def test_principal_digest_is_keyed() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        a = keyring.principal_digest("auth.user:1")
        assert keyring.principal_matches(a, "auth.user:1") is False  # a digest, not the principal
        assert keyring.principal_matches(a, keyring.principal_digests("auth.user:1"))
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_B}):
        b = keyring.principal_digest("auth.user:1")
    assert a != b and "user" not in a
