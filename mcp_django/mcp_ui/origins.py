"""What a rendered view loads from outside itself (markup, CSS ``url()``/``@import``, literal URLs
given to ``fetch``/``WebSocket``/``EventSource``), by the CSP list that must allow it: a host's
policy is built from the view's declaration alone, so check E002 reports an undeclared load.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from typing import NamedTuple
from urllib.parse import urlsplit

# Elements whose attribute loads something, and the CSP list that must allow it.
_LOADS = {
    ("script", "src"): "resourceDomains",
    ("img", "src"): "resourceDomains",
    ("img", "srcset"): "resourceDomains",
    ("source", "src"): "resourceDomains",
    ("source", "srcset"): "resourceDomains",
    ("audio", "src"): "resourceDomains",
    ("video", "src"): "resourceDomains",
    ("video", "poster"): "resourceDomains",
    ("track", "src"): "resourceDomains",
    ("link", "href"): "resourceDomains",
    ("image", "href"): "resourceDomains",
    ("use", "href"): "resourceDomains",
    ("iframe", "src"): "frameDomains",
    ("frame", "src"): "frameDomains",
    ("base", "href"): "baseUriDomains",
}
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)|@import\s+["']([^"']+)""", re.IGNORECASE)
_CONNECT = re.compile(r"""\b(?:fetch|WebSocket|EventSource)\(\s*["'`]([^"'`]+)""")


class Load(NamedTuple):
    """One URL the page loads, and the CSP list (``resourceDomains``...) that must allow it."""

    url: str
    kind: str

    @property
    def origin(self) -> str | None:
        """``scheme://host[:port]``; None for what stays in the page (``data:``, ``#id``, ``blob:``)."""
        parts = urlsplit(self.url)
        if parts.scheme in ("data", "blob", "about", "javascript") or self.url.startswith("#"):
            return None
        if not parts.netloc:
            return ""  # relative: the host's origin, which no view can declare
        return f"{parts.scheme or 'https'}://{parts.netloc}".lower()


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.loads: list[Load] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in = tag if tag in ("script", "style") else None
        for name, value in attrs:
            if not value:
                continue
            kind = _LOADS.get((tag, name))
            if name == "href" and tag == "link":
                rel = dict(attrs).get("rel") or ""
                kind = None if rel.lower() in ("canonical", "alternate", "author", "help", "license") else kind
            if kind is not None:
                urls = [u.strip().split(" ")[0] for u in value.split(",")] if name == "srcset" else [value]
                self.loads += [Load(url, kind) for url in urls if url]
            elif name == "style":
                self._css(value)

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self._css(data)
        elif self._in == "script":
            self.loads += [Load(url, "connectDomains") for url in _CONNECT.findall(data)]

    def _css(self, text: str) -> None:
        self.loads += [Load(a or b, "resourceDomains") for a, b in _CSS_URL.findall(text)]


def loads(html: str) -> list[Load]:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.loads


def allows(declared: Iterable[str], origin: str) -> bool:
    """Whether a CSP list allows ``origin`` (``https://*.example.com`` allows its subdomains)."""
    for entry in declared:
        entry = entry.rstrip("/").lower()
        if entry == origin:
            return True
        scheme, _, host = entry.partition("://*.")
        if host and origin.startswith(f"{scheme}://") and origin.endswith(f".{host}"):
            return True
    return False


def undeclared(html: str, csp: dict[str, tuple[str, ...]]) -> Iterator[Load]:
    """The page's loads no declared origin allows (relative URLs included: they never load)."""
    for load in loads(html):
        origin = load.origin
        if origin is None:
            continue
        if origin == "" or not allows(csp.get(load.kind, ()), origin):
            yield load
