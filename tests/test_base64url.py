"""The one base64url codec: unpadded, and one spelling per byte string."""

from __future__ import annotations

import base64

import pytest

from mcp_django import base64url


@pytest.mark.parametrize("data", [b"", b"\x00", b"ab", b"abc", b"\xfb\xff\xfe", bytes(range(256))])
def test_round_trip_without_padding(data: bytes) -> None:
    text = base64url.encode(data)
    assert "=" not in text and "+" not in text and "/" not in text
    assert text == base64.urlsafe_b64encode(data).decode().rstrip("=")
    assert base64url.encode_bytes(data) == text.encode()  # the same spelling, as bytes
    if data:
        assert base64url.decode(text) == data
    assert base64url.decode_verified(text) == data  # what a verified MAC's text decodes to


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
    ],
)
def test_refuses_every_spelling_but_the_canonical_one(text: str) -> None:
    if text in ("YWJ", "AB"):
        assert base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))  # Python's decoder accepts it
    with pytest.raises(ValueError):
        base64url.decode(text)
