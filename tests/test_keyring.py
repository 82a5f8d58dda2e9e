"""The keys derived from REQUEST_STATE_KEY (or SECRET_KEY): fixed derivations, one key per use, rotation."""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings
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


def test_the_prepared_macs_are_hmac_sha256_under_their_keys() -> None:
    """Each key's MAC is made with its key schedule done once: the same bytes as a fresh
    ``hmac.new`` under that key, message after message (the prepared state is never consumed)."""
    ring = KeyRing([KEY_A.encode(), KEY_B.encode()])
    messages = [b"", b"v1.kid.payload", b"x" * 1000, "é".encode()]
    for _ in range(2):
        for message in messages:
            for key in ring.keys:
                assert key.mac(message) == hmac.new(key.mac_key, message, hashlib.sha256).digest()
            for prepared, principal_key in zip(ring.principal_macs, ring.principal_keys, strict=True):
                assert prepared(message) == hmac.new(principal_key, message, hashlib.sha256).digest()
    assert ring.keys[0].mac(b"m") != ring.keys[1].mac(b"m")


def test_keyed_mac_is_hmac_sha256_for_keys_of_any_length() -> None:
    """keyed_mac's prepared state gives the same bytes as a fresh HMAC, for keys shorter than, as
    long as and longer than SHA-256's block, and for each message (none leaks into the next)."""
    for key_length in (0, 1, 32, 63, 64, 65, 200):
        key = bytes(range(key_length % 256)) * (key_length // 256) + bytes(range(key_length % 256))
        mac = keyring.keyed_mac(key)
        for message in (b"", b"m", b"x" * 55, b"x" * 64, b"y" * 1000):
            assert mac(message) == hmac.digest(key, message, "sha256")


def test_every_use_has_a_key_of_its_own() -> None:
    ring = KeyRing([KEY_A.encode(), KEY_B.encode()])
    material = [k.mac_key for k in ring.keys] + [k.session_key for k in ring.keys] + ring.principal_keys
    assert len(set(material)) == len(material) == 6
    assert ring.signing is ring.keys[0] and set(ring.by_kid) == {k.kid for k in ring.keys}


def test_the_ring_follows_the_setting() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        first = keyring.keyring()
        assert keyring.keyring() is first and first.signing.kid == KeyRing([KEY_A.encode()]).signing.kid
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": [KEY_B, KEY_A]}):
        rotated = keyring.keyring()
        assert rotated.signing.kid != first.signing.kid and first.signing.kid in rotated.by_kid
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": None}):
        from_secret_key = KeyRing(keyring.secrets_from_secret_key(settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS))
        assert keyring.keyring().signing.kid == from_secret_key.signing.kid


def test_principal_digest_is_keyed() -> None:
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        a = keyring.principal_digests("auth.user:1")[0]
        assert keyring.principal_matches(a, "auth.user:1") is False  # a digest, not the principal
        assert keyring.principal_matches(a, keyring.principal_digests("auth.user:1"))
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEY": KEY_B}):
        b = keyring.principal_digests("auth.user:1")[0]
    assert a != b and "user" not in a


SECRET = "django-secret-key-for-the-keyring-tests-0123456789-abcdefghij"
OLD_SECRET = "an-older-django-secret-key-for-the-keyring-tests-0123456789-xyz"


def test_without_a_key_the_ring_derives_from_secret_key() -> None:
    # Known answer: every worker and instance of a project derives the same ring from its
    # SECRET_KEY, and an upgrade must not end the states and sessions issued before it.
    with override_settings(SECRET_KEY=SECRET, SECRET_KEY_FALLBACKS=[], MCP_DJANGO={"REQUEST_STATE_KEY": None}):
        ring = keyring.keyring()
        assert len(ring.keys) == 1
        assert ring.signing.kid == KeyRing(keyring.secrets_from_secret_key(SECRET, [])).signing.kid
        assert ring.signing.mac_key.hex() == "3dca7cc4d83e044902f48b8583b7fba300230a7ecf0a847548cf7fcef1074b84"
        digest = keyring.principal_digests("auth.user:1")[0]
    # Not SECRET_KEY itself as the secret (that is django.core.signing's key, under its own salts).
    assert ring.signing.kid != KeyRing([SECRET.encode()]).signing.kid
    with override_settings(SECRET_KEY=OLD_SECRET, MCP_DJANGO={"REQUEST_STATE_KEY": None}):
        assert keyring.keyring().signing.kid != ring.signing.kid
        assert keyring.principal_digests("auth.user:1")[0] != digest


def test_secret_key_fallbacks_verify_and_secret_key_signs() -> None:
    with override_settings(SECRET_KEY=OLD_SECRET, SECRET_KEY_FALLBACKS=[], MCP_DJANGO={"REQUEST_STATE_KEY": None}):
        old = keyring.keyring()
        old_digest = keyring.principal_digests("auth.user:1")[0]
    with override_settings(
        SECRET_KEY=SECRET, SECRET_KEY_FALLBACKS=[OLD_SECRET], MCP_DJANGO={"REQUEST_STATE_KEY": None}
    ):
        rotated = keyring.keyring()
        assert rotated.signing.kid != old.signing.kid and old.signing.kid in rotated.by_kid
        assert rotated.by_kid[old.signing.kid].session_key == old.signing.session_key
        assert keyring.principal_matches(old_digest, keyring.principal_digests("auth.user:1"))
    # A configured REQUEST_STATE_KEY wins: rotating SECRET_KEY then leaves these keys alone.
    with override_settings(SECRET_KEY=SECRET, MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        assert keyring.keyring().signing.kid == KeyRing([KEY_A.encode()]).signing.kid
    with override_settings(SECRET_KEY=OLD_SECRET, MCP_DJANGO={"REQUEST_STATE_KEY": KEY_A}):
        assert keyring.keyring().signing.kid == KeyRing([KEY_A.encode()]).signing.kid


# RFC 5869, appendix A: test cases 1 to 3 (SHA-256): IKM, salt, info, L, OKM.
RFC5869 = [
    (
        "0b" * 22,
        "000102030405060708090a0b0c",
        "f0f1f2f3f4f5f6f7f8f9",
        42,
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
    ),
    (
        bytes(range(0x00, 0x50)).hex(),
        bytes(range(0x60, 0xB0)).hex(),
        bytes(range(0xB0, 0x100)).hex(),
        82,
        "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09"
        "da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87",
    ),
    ("0b" * 22, "", "", 42, "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"),
]


def test_hkdf_gives_rfc_5869s_known_answers() -> None:
    # derive_key gives 32 bytes: the first 32 of each known answer (its first block).
    for ikm, salt, info, _length, okm in RFC5869:
        derived = keyring.derive_key(bytes.fromhex(ikm), bytes.fromhex(info), salt=bytes.fromhex(salt))
        assert derived.hex() == okm[:64]


def test_hkdf_derives_the_keys_cryptographys_hkdf_derived() -> None:
    """The keys were derived by cryptography's HKDF until it was only needed to seal: the same
    bytes, so states and sessions issued before still verify."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    for secret in (KEY_A.encode(), KEY_B.encode(), b"", bytes(range(256))):
        for info in (b"mcp-django requestState hmac-sha256 v1", b"mcp-django principal v1", b""):
            theirs = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"mcp-django", info=info).derive(secret)
            assert keyring.derive_key(secret, info) == theirs
