"""The things a handler can ask the client, the answers they turn into, and what an ask raises.

An :class:`Ask` is era-neutral: ``method`` and ``params`` travel as an ``inputRequests`` entry
or a server-to-client request; ``parse`` turns the raw answer into what the handler receives.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import schema as schemas
from ..protocol.jsonrpc import INVALID_PARAMS, MISSING_CAPABILITY, MCPError, canonical
from ..schema.drf import error_lines

Action = Literal["accept", "decline", "cancel"]


class AnswerInvalid(MCPError):
    """The client's answer to an ask does not have the shape the ask needs."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(INVALID_PARAMS, f"the answer to input request {key!r} is not valid: {problem}")
        self.key = key
        self.problem = problem


class ContentInvalid(AnswerInvalid):
    """An accepted form whose content does not fit what was asked: a person's mistake, asked again
    (same key), saying what was wrong."""


# Every Ask.type, as the helpers below make them: a key given without key=... starts with one.
ASK_TYPES = ("confirm", "elicit", "elicit-url", "sample", "roots")


@dataclass
class Ask:
    method: str
    params: dict[str, Any]
    capability: str
    type: str  # one of ASK_TYPES
    key: str | None = None
    parse: Callable[[str, Any], Any] = field(default=lambda key, raw: raw, repr=False)
    # Why the previous answer was refused, when this ask is asked again (see again()).
    retry: str | None = None

    @functools.cached_property
    def digest(self) -> str:
        """Identifies the question, so a stale answer to a different question is never reused."""
        return hashlib.sha256(canonical([self.method, self.params])).hexdigest()[:24]

    def default_key(self) -> str:
        return f"{self.type}-{self.digest[:12]}"

    def key_among(self, counts: dict[str, int]) -> str:
        """The key this ask travels under, in both eras: the same question asked twice in one
        attempt without ``key=`` gets distinct, deterministic keys (``key``, ``key-2``)."""
        if self.key:
            return self.key
        base = self.default_key()
        n = counts[base] = counts.get(base, 0) + 1
        return base if n == 1 else f"{base}-{n}"

    def wire(self) -> dict[str, Any]:
        return {"method": self.method, "params": self.params}

    def again(self, problem: str) -> Ask:
        """This ask, to be asked again (see ContentInvalid), its message saying what was wrong with
        the last answer. Its digest stays the question's (the handler asks the same)."""
        params = self.params
        if isinstance(params.get("message"), str):
            note = f"(The previous answer was not accepted: {problem}. Please answer again.)"
            params = {**params, "message": f"{params['message']}\n\n{note}"}
        again = dataclasses.replace(self, params=params, retry=problem)
        again.__dict__["digest"] = self.digest
        return again


@dataclass
class ElicitResult:
    """The user's answer to an elicitation. ``data`` is the validated content when accepted."""

    action: Action
    data: Any = None
    content: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"

    def __bool__(self) -> bool:
        return self.accepted


@dataclass
class SampleResult:
    role: str
    content: Any
    model: str
    stop_reason: str | None = None

    @property
    def text(self) -> str:
        blocks = self.content if isinstance(self.content, list) else [self.content]
        return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


@dataclass
class Root:
    uri: str
    name: str | None = None


def _require_dict(key: str, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise AnswerInvalid(key, "expected an object")
    return raw


def _action(key: str, raw: Any) -> Action:
    action = _require_dict(key, raw).get("action")
    if action not in ("accept", "decline", "cancel"):
        raise AnswerInvalid(key, "action must be accept, decline or cancel")
    return action


def _elicit_parser(
    json_schema: dict[str, Any], serializer: Any = None, target: Any = None
) -> Callable[[str, Any], ElicitResult]:
    """Checks an answer's content against what was asked, and makes the handler's ``data``: a
    serializer's ``validated_data``, an instance of a type, or the dict a JSON schema validated."""
    validator = schemas.validator_for(json_schema) if serializer is None and target is None else None

    def parse(key: str, raw: Any) -> ElicitResult:
        action = _action(key, raw)
        content = raw.get("content")
        if action != "accept":
            return ElicitResult(action, None, content if isinstance(content, dict) else None)
        if not isinstance(content, dict):
            raise AnswerInvalid(key, "an accepted elicitation needs content (an object)")
        if serializer is not None:
            instance = serializer(data=content)
            if not instance.is_valid():
                raise ContentInvalid(key, "; ".join(error_lines(instance.errors)))
            return ElicitResult(action, dict(instance.validated_data), content)
        if target is not None:
            try:
                return ElicitResult(action, schemas.convert(content, target), content)
            except ValueError as exc:  # msgspec.ValidationError is a ValueError
                raise ContentInvalid(key, schemas.problem(exc)) from None
        assert validator is not None
        errors = validator.errors(content)
        if errors:
            raise ContentInvalid(key, "; ".join(errors))
        return ElicitResult(action, content, content)

    return parse


@functools.cache
def _form(tp: Any) -> tuple[dict[str, Any], Any]:
    """The requested schema of a type, and the type to convert answers into (built once per type):
    a form's fields have one type each, as elicitation's primitive schemas have them
    (``start: date | None = None`` is an optional date field)."""
    prepared = schemas.prepare(tp, f"the elicitation schema {getattr(tp, '__qualname__', tp)!r}")
    schema = prepared.schema
    for name, prop in schema.get("properties", {}).items():
        types = prop.get("type")
        if isinstance(types, list) and "null" in types and len(types) == 2 and name not in schema.get("required", ()):
            prop["type"] = next(t for t in types if t != "null")
            if prop.get("default", 0) is None:
                del prop["default"]
            if isinstance(prop.get("enum"), list):
                prop["enum"] = [v for v in prop["enum"] if v is not None]
    return schema, prepared.type


def elicit(message: str, schema: Any, *, key: str | None = None) -> Ask:
    """A form: ``schema`` is a JSON schema dict, a dataclass, a TypedDict, a Pydantic model or a DRF
    serializer; the accepted answer's ``data`` is the dict, the instance, or ``validated_data``."""
    serializer = None
    target = None
    if isinstance(schema, dict):
        json_schema = schema
    elif schemas.is_serializer(schema):
        serializer = schema if isinstance(schema, type) else type(schema)
        json_schema = schemas.serializer_schema(schema)
    else:
        json_schema, target = _form(schema)
    if json_schema.get("type") != "object":
        raise TypeError("an elicitation schema must describe an object")
    params = {"mode": "form", "message": message, "requestedSchema": json_schema}
    return Ask(
        "elicitation/create", params, "elicitation.form", "elicit", key, _elicit_parser(json_schema, serializer, target)
    )


CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Confirm", "default": False}},
    "required": ["confirm"],
}


def confirm(message: str, *, key: str | None = None) -> Ask:
    """Yes or no: true only when the user accepts and ticks confirm."""
    params = {"mode": "form", "message": message, "requestedSchema": CONFIRM_SCHEMA}
    return Ask("elicitation/create", params, "elicitation.form", "confirm", key, _confirmed)


def _confirmed(key: str, raw: Any) -> bool:
    result = _elicit_parser(CONFIRM_SCHEMA)(key, raw)
    return bool(result.accepted and result.data.get("confirm"))


def elicit_url(message: str, url: str, *, key: str | None = None, elicitation_id: str | None = None) -> Ask:
    """Send the user to a URL (an OAuth consent, a payment page) and wait for them."""

    params: dict[str, Any] = {"mode": "url", "message": message, "url": url}
    ask = Ask("elicitation/create", params, "elicitation.url", "elicit-url", key, _url_answer)
    params["elicitationId"] = elicitation_id or ask.digest
    return ask


def _url_answer(key: str, raw: Any) -> ElicitResult:
    return ElicitResult(_action(key, raw))


def sample(
    prompt: str | list[dict[str, Any]],
    *,
    max_tokens: int = 512,
    system_prompt: str | None = None,
    temperature: float | None = None,
    stop_sequences: list[str] | None = None,
    model_preferences: dict[str, Any] | None = None,
    include_context: str | None = None,
    key: str | None = None,
) -> Ask:
    """Ask the client's model. ``prompt`` is a user message's text, or a list of messages."""
    messages = (
        [{"role": "user", "content": {"type": "text", "text": prompt}}] if isinstance(prompt, str) else list(prompt)
    )
    params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
    for name, value in (
        ("systemPrompt", system_prompt),
        ("temperature", temperature),
        ("stopSequences", stop_sequences),
        ("modelPreferences", model_preferences),
        ("includeContext", include_context),
    ):
        if value is not None:
            params[name] = value

    def parse(k: str, raw: Any) -> SampleResult:
        raw = _require_dict(k, raw)
        content, role, model = raw.get("content"), raw.get("role"), raw.get("model")
        if role not in ("assistant", "user") or not isinstance(model, str):
            raise AnswerInvalid(k, "a sampling result needs role and model")
        blocks = content if isinstance(content, list) else [content]
        if not blocks or not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in blocks):
            raise AnswerInvalid(k, "a sampling result needs content blocks")
        stop = raw.get("stopReason")
        return SampleResult(role, content, model, stop if isinstance(stop, str) else None)

    return Ask("sampling/createMessage", params, "sampling", "sample", key, parse)


def list_roots(*, key: str | None = None) -> Ask:
    def parse(k: str, raw: Any) -> list[Root]:
        raw = _require_dict(k, raw)
        roots = raw.get("roots")
        if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots):
            raise AnswerInvalid(k, "roots must be a list of objects with a uri")
        return [Root(r["uri"], r.get("name") if isinstance(r.get("name"), str) else None) for r in roots]

    return Ask("roots/list", {}, "roots", "roots", key, parse)


class MissingCapability(MCPError):
    """The client did not declare a capability an ask needs, raised by the ask before anything is
    sent, in both eras (docs/index.md). ``capabilities``: their dotted names (``"elicitation.url"``)."""

    def __init__(self, capabilities: Iterable[str]) -> None:
        names = list(dict.fromkeys(capabilities))
        self.capabilities = names
        # ["elicitation.form", "sampling"] -> {"elicitation": {"form": {}}, "sampling": {}}
        required: dict[str, Any] = {}
        for name in names:
            head, _, sub = name.partition(".")
            entry = required.setdefault(head, {})
            if sub:
                entry[sub] = {}
        quoted = ", ".join(repr(name) for name in names)
        plural = "ies" if len(names) > 1 else "y"
        super().__init__(
            MISSING_CAPABILITY,
            f"this request needs the client capabilit{plural} {quoted}, which it did not declare",
            {"requiredCapabilities": required},
        )


def escaped(error: BaseException | None) -> MissingCapability | None:
    """The :class:`MissingCapability` an attempt ended with, also from inside a TaskGroup's group."""
    if isinstance(error, MissingCapability):
        return error
    if isinstance(error, BaseExceptionGroup):
        found: BaseException | None = error.subgroup(MissingCapability)
        while isinstance(found, BaseExceptionGroup):
            found = found.exceptions[0]
        return found if isinstance(found, MissingCapability) else None
    return None


class TaskCancelled(BaseException):
    """Raised by ``ctx.check_cancelled()`` (and by an ask) once the client cancelled the task.

    A ``BaseException``, so ``except Exception`` cannot swallow it; catch it only to clean up.
    """


class StartTask(BaseException):
    """Ends the request's attempt at ``ctx.start_task()``, carrying its answers and ``ctx.state``
    to the MCP task that runs the rest."""

    def __init__(self, answers: dict[str, Any], state: dict[str, str]) -> None:
        super().__init__("start_task")
        self.answers = answers
        self.state = state


class InputRequired(BaseException):
    """Ends an attempt whose asks have no answer yet; a ``BaseException`` so handlers cannot swallow it."""


class ClientError(MCPError):
    """The client answered a server-to-client request (2025-11-25 and earlier) with a JSON-RPC error."""
