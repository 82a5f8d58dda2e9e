"""The base64url of every token (mcp_django.keyring): unpadded, and one spelling per byte string."""

from __future__ import annotations

import base64

import pytest

from mcp_django.keyring import b64decode, b64encode


@pytest.mark.parametrize("data", [b"", b"\x00", b"ab", b"abc", b"\xfb\xff\xfe", bytes(range(256))])
def test_round_trip_without_padding(data: bytes) -> None:
    text = b64encode(data)
    assert "=" not in text and "+" not in text and "/" not in text
    assert text == base64.urlsafe_b64encode(data).decode().rstrip("=")
    if data:
        assert b64decode(text) == data


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("YWI=", id="padded"),
        pytest.param("YW+/", id="standard alphabet"),
        pytest.param("YW I", id="space"),
        pytest.param("YWJjZ", id="impossible length"),
        pytest.param("YWJ", id="unused bits set"),  # "YWI" is the spelling of b"ab"
        pytest.param("AB", id="unused bits set, one byte"),  # "AA" is the spelling of b"\x00"
        pytest.param("YW\u00e9", id="not ASCII"),
        pytest.param("YW\nI", id="newline"),
    ],
)
def test_refuses_every_spelling_but_the_canonical_one(text: str) -> None:
    if text in ("YWJ", "AB"):
        assert base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))  # Python's decoder accepts it
    with pytest.raises(ValueError):
        b64decode(text)
