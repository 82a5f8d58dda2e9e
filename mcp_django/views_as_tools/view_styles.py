"""What sort of view a tool wraps (plain Django, APIView, viewset), and the names derived from it."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from django.utils.text import camel_case_to_spaces

from ..handlers import TOOL_NAME_MAX

STANDARD_ACTIONS: dict[str, str] = {
    "list": "get",
    "retrieve": "get",
    "create": "post",
    "update": "put",
    "partial_update": "patch",
    "destroy": "delete",
}
DETAIL_ACTIONS = frozenset({"retrieve", "update", "partial_update", "destroy"})
HTTP_METHODS = ("get", "post", "put", "patch", "delete")
# Headers of the MCP request that must not reach the view: the credentials (the
# principal is passed on instead), the MCP protocol headers, and what describes
# the MCP body rather than the view's.
DROPPED_HEADERS = (
    "HTTP_AUTHORIZATION",
    "HTTP_COOKIE",
    "HTTP_ACCEPT",
    "HTTP_MCP_",
    "HTTP_CONTENT_",
    "HTTP_LAST_EVENT_ID",
)
ACTION_TEXT = {
    "list": "List {plural}.",
    "retrieve": "Get one {name} by its {lookup}.",
    "create": "Create {a_name}.",
    "update": "Replace {a_name} (every writable field).",
    "partial_update": "Change some fields of {a_name}.",
    "destroy": "Delete {a_name}.",
}
# What a view without a docstring is said to do with each HTTP method ("Get the order summary.").
METHOD_VERBS = {"get": "Get", "post": "Submit", "put": "Replace", "patch": "Update", "delete": "Delete"}
# Words generic views' class names end with that the tool's action already says (NoteList → note_list, not note_list_list).
GENERIC_SUFFIXES = ("list", "create", "detail", "retrieve", "update", "destroy")
# Words that begin with a vowel letter but a consonant sound, and the reverse.
_A_BEFORE = ("one", "once", "eu", "uni", "use", "usa", "usu", "uti", "ure", "uro", "ufo")
_AN_BEFORE = ("hour", "honest", "honor", "honour", "heir")


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an", as it sounds: "an order", "a user", "an hour"."""
    word = noun.strip().lower()
    if word.startswith(_AN_BEFORE):
        return f"an {noun}"
    if not word or word.startswith(_A_BEFORE) or word[0] not in "aeiou":
        return f"a {noun}"
    return f"an {noun}"


def method_text(method: str, what: str) -> str:
    """A sentence for a view with no docstring: "Get the order summary." (``what`` is a snake_case name)."""
    words = what.replace("_", " ").strip() or "view"
    return f"{METHOD_VERBS.get(method, method.upper())} the {words}."


def is_viewset(cls: Any) -> bool:
    from rest_framework.viewsets import ViewSetMixin

    return isinstance(cls, type) and issubclass(cls, ViewSetMixin)


def is_apiview(cls: Any) -> bool:
    from rest_framework.views import APIView

    return isinstance(cls, type) and issubclass(cls, APIView)


def view_class_of(view: Any) -> Any:
    """The class behind ``view``: a class, or what ``as_view()`` made (``view_class``/``cls``)."""
    if isinstance(view, type):
        return view
    return getattr(view, "cls", None) or getattr(view, "view_class", None)


def snake_name(name: str) -> str:
    for suffix in ("ViewSet", "APIView", "View"):
        if name.endswith(suffix) and name != suffix:
            name = name[: -len(suffix)]
            break
    return camel_case_to_spaces(name).replace(" ", "_") or "view"


def generic_prefix(name: str) -> str:
    """A generic view's class name without the actions it ends with (``ProductListCreateView`` → ``product``)."""
    words = snake_name(name).split("_")
    while len(words) > 1 and words[-1] in GENERIC_SUFFIXES:
        words.pop()
    return "_".join(words)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()


def clip_name(name: str) -> str:
    """A derived name that fits the 64-character limit, kept unique by a hash of the full name."""
    if len(name) <= TOOL_NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: TOOL_NAME_MAX - 9]}_{digest}"
