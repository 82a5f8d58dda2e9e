"""base64url without padding (RFC 4648, section 5), with one spelling per byte string.

Every token this app issues or reads in this alphabet uses it: ``requestState``,
legacy session ids, and the credential a websocket client offers as a subprotocol.
Python's own decoder skips characters outside the alphabet and ignores the unused
low bits of the last character, so several spellings decode alike; an edited
token must never verify, so :func:`decode` refuses anything but the spelling
:func:`encode` makes.
"""

from __future__ import annotations

import base64
import re

_ALPHABET = re.compile(r"[A-Za-z0-9_-]+")


def encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode(text: str) -> bytes:
    """The bytes ``text`` spells, or ``ValueError`` unless it is their canonical spelling."""
    if not text or len(text) % 4 == 1 or not _ALPHABET.fullmatch(text):
        raise ValueError("not base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if encode(data) != text:
        raise ValueError("not canonical base64url")
    return data


def decode_verified(text: str) -> bytes:
    """The bytes of ``text`` that a MAC over ``text`` itself has just verified.

    Only :func:`encode` made such a text (a key of ours signed it), so it is the canonical
    spelling: checking that again (:func:`decode`'s pattern and re-encoding, two thirds of
    its cost) could never refuse it. Never for text that no MAC covers.
    """
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
