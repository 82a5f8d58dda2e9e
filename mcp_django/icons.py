"""Icons for the server, tools, prompts, resources and templates (MCP 2025-11-25 and later).

Declared at registration (a static file's path, an absolute URL, or an :class:`Icon`) and
checked there; a static path becomes a URL on first use (``collectstatic`` imports the
handlers before the manifest exists), and a listing joins a relative one to the origin.
"""

from __future__ import annotations

import functools
import mimetypes
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import urljoin, urlsplit

from django.core.exceptions import DisallowedHost, ImproperlyConfigured
from django.core.signals import setting_changed

__all__ = ["Icon"]

# The first revision with icons (and serverInfo's websiteUrl and description); dates sort as text.
FIRST_REVISION = "2025-11-25"
THEMES = ("light", "dark")
_SCHEMES = ("http", "https", "data")


def revision_has_icons(version: str) -> bool:
    return version >= FIRST_REVISION


@dataclass(frozen=True)
class Icon:
    """One icon: ``src`` is a static file's path (``"shop/icons/cart.svg"``) or an absolute URL.

    ``mime_type`` is guessed from the file name when not given; ``sizes`` are the
    specification's strings (``"48x48"``, ``"any"``); ``theme`` is ``"light"`` or
    ``"dark"``: the background the icon is drawn for.
    """

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] = ()
    theme: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.src, str) or not self.src:
            raise ImproperlyConfigured(f"an icon's src must be a non-empty str, not {self.src!r}")
        if self.theme is not None and self.theme not in THEMES:
            raise ImproperlyConfigured(f"icon {self.src!r}: theme must be 'light' or 'dark', not {self.theme!r}")
        sizes = (self.sizes,) if isinstance(self.sizes, str) else tuple(self.sizes)
        if not all(isinstance(s, str) and s for s in sizes):
            raise ImproperlyConfigured(f"icon {self.src!r}: sizes must be strings such as '48x48' or 'any'")
        object.__setattr__(self, "sizes", sizes)
        if self.mime_type is None and not self.src.startswith("data:"):
            object.__setattr__(self, "mime_type", mimetypes.guess_type(urlsplit(self.src).path)[0])

    def described(self, url: str) -> dict[str, Any]:
        out = {"src": url, "mimeType": self.mime_type, "sizes": list(self.sizes), "theme": self.theme}
        return {key: value for key, value in out.items() if value}  # the optional ones only when set


IconSpec = Icon | str | Mapping[str, Any]


def icons(values: Iterable[IconSpec] | None, owner: str) -> tuple[Icon, ...]:
    """The icons of ``icons=[...]``, checked (at registration): each an Icon, a str or a dict."""
    if not values:
        return ()
    if isinstance(values, (str, Mapping, Icon)):
        raise ImproperlyConfigured(f"{owner}: icons= takes a list of icons, not one {type(values).__name__}")
    out = []
    for value in values:
        if isinstance(value, str):
            value = Icon(value)
        elif isinstance(value, Mapping):
            if "src" not in value or set(value) - {"src", "mimeType", "mime_type", "sizes", "theme"}:
                raise ImproperlyConfigured(
                    f"{owner}: an icon dict takes src and optionally mimeType, sizes, theme; got {sorted(value)}"
                )
            mime_type = value.get("mimeType", value.get("mime_type"))
            value = Icon(value["src"], mime_type=mime_type, sizes=value.get("sizes", ()), theme=value.get("theme"))
        elif not isinstance(value, Icon):
            raise ImproperlyConfigured(f"{owner}: an icon is an Icon, a static path or a dict, not {value!r}")
        out.append(value)
    return tuple(out)


@functools.cache
def static_url(src: str) -> str:
    """``src`` when it is an absolute URL, else its URL from the staticfiles storage (kept)."""
    if urlsplit(src).scheme in _SCHEMES:
        return src
    from django.contrib.staticfiles.storage import staticfiles_storage

    return staticfiles_storage.url(src)


def _forget(setting: str, **kwargs: Any) -> None:
    if setting in ("STATIC_URL", "STORAGES", "STATIC_ROOT", "FORCE_SCRIPT_NAME"):
        static_url.cache_clear()
        _resolved.cache_clear()


setting_changed.connect(_forget, dispatch_uid="mcp_django.icons")


class IconBase:
    """How one answer resolves its icons' URLs: against RESOURCE_URL's origin, else the request's
    (built only for a relative URL; without one, as on stdio, such an icon is left out)."""

    def __init__(self, request: Callable[[], Any] | None, resource_url: str | None = None) -> None:
        self._request = request
        self._resource_url = resource_url

    @cached_property
    def origin(self) -> str | None:
        configured = urlsplit(self._resource_url or "")
        if configured.scheme and configured.netloc:
            return f"{configured.scheme}://{configured.netloc}"
        request = self._request() if self._request is not None else None
        # No Host, no origin: stdio's request names none, and "unknown" is no host to send.
        if request is None or not request.META.get("HTTP_HOST"):
            return None
        try:
            return f"{request.scheme}://{request.get_host()}"
        except DisallowedHost:
            return None

    def describe(self, declared: tuple[Icon, ...]) -> list[dict[str, Any]]:
        # The origin (which may build the request) only for an icon whose URL is relative.
        relative = any(urlsplit(static_url(icon.src)).scheme not in _SCHEMES for icon in declared)
        return list(_resolved(declared, self.origin if relative else None))


@functools.lru_cache(maxsize=512)
def _resolved(declared: tuple[Icon, ...], origin: str | None) -> tuple[dict[str, Any], ...]:
    """The icons as a listing sends them, once per origin (a listing then only looks them up)."""
    out = []
    for icon in declared:
        url = static_url(icon.src)
        if urlsplit(url).scheme not in _SCHEMES:
            if origin is None:
                continue  # no host to make it absolute with (stdio): a relative URI is no icon
            url = origin + url if url.startswith("/") and not url.startswith("//") else urljoin(origin + "/", url)
        out.append(icon.described(url))
    return tuple(out)


def icon_base(version: str, request: Callable[[], Any] | None, resource_url: str | None) -> IconBase | None:
    """The resolver for an answer at ``version`` (None: that revision has no icons)."""
    return IconBase(request, resource_url) if revision_has_icons(version) else None
