"""A person at the demo's consent screen, for tests and the conformance run: signed in, they press Authorize."""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

import httpx

_INPUT = re.compile(r"<input\b[^>]*>", re.I)
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def approve(authorize_url: str, session_cookie: str, *, allow: bool = True) -> str:
    """Open the authorization URL as the signed-in user, submit the consent form, return the redirect."""
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(authorize_url))
    with httpx.Client(cookies={"sessionid": session_cookie}, timeout=30) as browser:
        page = browser.get(authorize_url)
        if page.status_code in (301, 302, 303):  # the application skips the consent screen
            return page.headers["location"]
        assert page.status_code == 200, page.text[:500]
        fields: dict[str, str] = {}
        for tag in _INPUT.findall(page.text):
            attrs = {k.lower(): html.unescape(v) for k, v in _ATTR.findall(tag)}
            if attrs.get("type") == "hidden" and "name" in attrs:
                fields[attrs["name"]] = attrs.get("value", "")
        assert "csrfmiddlewaretoken" in fields, page.text[:2000]
        if allow:
            fields["allow"] = "Authorize"
        done = browser.post(authorize_url, data=fields, headers={"referer": authorize_url, "origin": origin})
        assert done.status_code in (302, 303), done.text[:2000]
        return done.headers["location"]
