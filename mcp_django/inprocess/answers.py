"""What the test client answers a server's input request with: what a test's ``answer`` returns
made into the wire result, the same for both eras (docs/testing.md, "Answering")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..asks.questions import CONFIRM_SCHEMA


class NoAnswer(AssertionError):
    """The server asked something the test gave no answer for."""


@dataclass
class InputRequest:
    """One thing the server asked: an ``inputRequests`` entry, or a legacy server-to-client request."""

    key: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> str:
        """``confirm``, ``elicit``, ``elicit_url``, ``sample`` or ``roots``."""
        if self.method == "elicitation/create":
            if self.params.get("mode") == "url":
                return "elicit_url"
            return "confirm" if self.params.get("requestedSchema") == CONFIRM_SCHEMA else "elicit"
        return {"sampling/createMessage": "sample", "roots/list": "roots"}.get(self.method, self.method)

    @property
    def message(self) -> str | None:
        """An elicitation's message, or the text of a sampling request's last message."""
        if "message" in self.params:
            return self.params["message"]
        messages = self.params.get("messages")
        if isinstance(messages, list) and messages:
            content = messages[-1].get("content") if isinstance(messages[-1], dict) else None
            if isinstance(content, dict):
                return content.get("text")
        return None

    @property
    def schema(self) -> dict[str, Any] | None:
        return self.params.get("requestedSchema")

    @property
    def url(self) -> str | None:
        return self.params.get("url")

    def __str__(self) -> str:
        message = f", message {self.message!r}" if self.message else ""
        return f"{self.method} (key {self.key!r}{message})"


@dataclass(frozen=True)
class Answer:
    """An answer given as the client's exact result (see :func:`decline`, :func:`cancel`, :func:`raw`)."""

    result: dict[str, Any] | None = None
    # Legacy only: answer the server's request with this JSON-RPC error instead.
    error: dict[str, Any] | None = None


def accept(content: dict[str, Any] | None = None) -> Answer:
    """Accept an elicitation (with a form's content)."""
    return Answer({"action": "accept", **({"content": content} if content is not None else {})})


def decline() -> Answer:
    return Answer({"action": "decline"})


def cancel() -> Answer:
    return Answer({"action": "cancel"})


def raw(result: dict[str, Any]) -> Answer:
    """Send exactly this result (a malformed one, to test how a handler copes)."""
    return Answer(result)


def error(code: int, message: str, data: Any = None) -> Answer:
    """Legacy revisions: answer the server's request with a JSON-RPC error."""
    return Answer(error={"code": code, "message": message, **({"data": data} if data is not None else {})})


Answerer = Callable[[InputRequest], Any] | Mapping[str, Any] | None

# A sampling answer given as text: the model's reply.
_SAMPLED = {"role": "assistant", "model": "mcp-django-test", "stopReason": "endTurn"}


def answer_for(answer: Answerer, request: InputRequest) -> Answer:
    """Ask the test's ``answer`` (a callable, or a dict keyed by ask key or message); the wire answer
    for what it returned."""
    if answer is None:
        raise NoAnswer(f"the server asked {request} and the test gave no answer= for it")
    if isinstance(answer, Mapping):
        if request.key in answer:
            value = answer[request.key]
        elif request.message is not None and request.message in answer:
            value = answer[request.message]
        else:
            raise NoAnswer(f"the server asked {request}, which the test's answers do not name")
        if callable(value):
            value = value(request)
    else:
        value = answer(request)
    if value is None:
        raise NoAnswer(f"the test's answer returned None for {request}")
    if isinstance(value, Answer):
        return value
    ask_type = request.type
    if ask_type in ("confirm", "elicit", "elicit_url"):
        if value is True:
            if ask_type == "confirm":
                return accept({"confirm": True})
            props = (request.schema or {}).get("properties") or {}
            defaults = {name: p["default"] for name, p in props.items() if isinstance(p, dict) and "default" in p}
            return accept(None if ask_type == "elicit_url" else defaults)
        if value is False:
            return decline()
        if isinstance(value, Mapping) and ask_type != "elicit_url":
            return accept(dict(value))
    elif ask_type == "sample":
        if isinstance(value, str):
            return Answer({**_SAMPLED, "content": {"type": "text", "text": value}})
        if isinstance(value, Mapping):
            return Answer(dict(value))
    elif ask_type == "roots" and isinstance(value, (list, tuple)):
        roots = [{"uri": r} if isinstance(r, str) else dict(r) for r in value]
        return Answer({"roots": roots})
    raise TypeError(f"cannot answer {request} with {value!r}")
