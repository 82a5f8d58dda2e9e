"""base64url without padding (RFC 4648, section 5), with one spelling per byte string.

Every token this app issues or reads in this alphabet uses it: ``requestState``,
legacy session ids, and the credential a websocket client offers as a subprotocol.
Python's own decoder skips characters outside the alphabet and ignores the unused
low bits of the last character, so several spellings decode alike; an edited
token must never verify, so :func:`decode` refuses anything but the spelling
:func:`encode` makes.
"""

from __future__ import annotations

import binascii
import re

_ALPHABET = re.compile(r"[A-Za-z0-9_-]+")
# What base64.urlsafe_b64encode and urlsafe_b64decode do around binascii, without their
# Python-level argument checks: every state a round seals and opens goes through these.
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


def encode(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")


def encode_bytes(data: bytes) -> bytes:
    """:func:`encode`'s spelling as ASCII bytes: for text that is hashed or joined as bytes
    (a token's signed part, a MAC to compare), without a decode and an encode around it."""
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=")


def _decode(text: str) -> bytes:
    # Non-ASCII text raises UnicodeEncodeError, a ValueError, as base64's own decoder does.
    return binascii.a2b_base64(text.encode("ascii").translate(_FROM_URLSAFE) + b"=" * (-len(text) % 4))


def decode(text: str) -> bytes:
    """The bytes ``text`` spells, or ``ValueError`` unless it is their canonical spelling."""
    if not text or len(text) % 4 == 1 or not _ALPHABET.fullmatch(text):
        raise ValueError("not base64url")
    data = _decode(text)
    if encode(data) != text:
        raise ValueError("not canonical base64url")
    return data


def decode_verified(text: str) -> bytes:
    """The bytes of ``text`` that a MAC over ``text`` itself has just verified.

    Only :func:`encode` made such a text (a key of ours signed it), so it is the canonical
    spelling: checking that again (:func:`decode`'s pattern and re-encoding, two thirds of
    its cost) could never refuse it. Never for text that no MAC covers.
    """
    return _decode(text)
