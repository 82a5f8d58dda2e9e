"""A bounded, seeded generator of hostile MCP traffic (tests/test_fuzz.py sends it).

Each message starts from a well-formed request of some method (both eras) and is
then spoilt, or not, in one or more of the ways an attacker or a broken client
spoils them: bytes that are not JSON or not UTF-8, deep nesting, huge numbers and
strings, batches, values of the wrong type anywhere in the tree, odd ids, unknown
methods, and wrong or missing headers. Everything is bounded (sizes, depths) so a
run of N messages takes time proportional to N.

The strings a server hands to its database (names, URIs, what a user typed for a
completion, task ids) hold a NUL now and then (``nul_rate`` of them), which PostgreSQL's
text refuses: tests/test_fuzz_postgresql.py sends more of them, on PostgreSQL.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field
from typing import Any

MODERN = "2026-07-28"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_INFO = "io.modelcontextprotocol/clientInfo"
TASKS = "io.modelcontextprotocol/tasks"

MODERN_METHODS = (
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
)
LEGACY_METHODS = (
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "tasks/get",
)
NOTIFICATIONS = ("notifications/initialized", "notifications/cancelled", "notifications/roots/list_changed")
# Tools that take seconds by design (bursts, progress over time) or change the registry.
SLOW_TOOLS = frozenset(
    {
        "test_event_burst",
        "test_tool_with_progress",
        "test_tool_with_logging",
        "test_reconnection",
        "test_trigger_tool_change",
        "test_trigger_prompt_change",
        "test_streaming_elicitation",
    }
)


@dataclass
class Message:
    """One thing to send: an HTTP request (method, headers, body) or a websocket frame."""

    era: str  # "modern" or "legacy"
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    http_method: str = "POST"
    what: list[str] = field(default_factory=list)  # how it was spoilt, for failure messages

    def describe(self) -> str:
        return f"{self.http_method} {self.era} [{', '.join(self.what) or 'well-formed'}] {self.headers} {self.body[:300]!r}"


# The parameter each 2026-07-28 method's Mcp-Name header repeats.
NAME_PARAMS = {"resources/read": "uri", "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


class Fuzzer:
    def __init__(
        self, seed: int, catalogue: dict[str, Any], nul_rate: float = 0.05, focus: tuple[str, ...] = ()
    ) -> None:
        self.r = random.Random(seed)
        # Names the server knows (tools with their schemas, prompts, resources, templates).
        self.catalogue = catalogue
        self.next_id = 1
        self.nul_rate = nul_rate
        # Methods picked half of the time (those that look client strings up, say).
        self.focus = focus

    # -- values --------------------------------------------------------------------------

    def scalar(self) -> Any:
        r = self.r
        return r.choice(
            [
                None,
                True,
                False,
                0,
                -1,
                r.randint(-(2**63), 2**63 - 1),
                2**64 + r.randint(0, 1000),
                r.random() * 10 ** r.randint(-300, 300),
                "",
                self.text(),
                self.text(r.randint(1, 4000)),
            ]
        )

    def text(self, length: int | None = None) -> str:
        r = self.r
        length = r.randint(0, 40) if length is None else length
        alphabet = r.choice(
            [
                "abcdefghijklmnopqrstuvwxyz",
                "\x00\x01\x1f\x7f\"'\\/<>{}[]",
                "éß漢字🙂\u200b\u202e\ufeff\uffff",
                "0123456789.-e+",
            ]
        )
        return "".join(r.choice(alphabet) for _ in range(min(length, 64))) * max(1, length // 64)

    def stored(self, known: str) -> str:
        """A string the server may look up in its database: ``known`` (a name or URI it
        serves), now and then with a NUL put in (PostgreSQL's text refuses it)."""
        if self.r.random() >= self.nul_rate:
            return known
        at = self.r.randint(0, len(known))
        return known[:at] + self.r.choice(["\x00", "\x00\x00", "x\x00y"]) + known[at:]

    def task_id(self) -> str:
        r = self.r
        return self.stored(
            r.choice(["0b5e0a4e-8a3f-4d7c-9e1b-2f6a7c8d9e0f", self.text(), "", "x" * r.randint(1, 300), "1"])
        )

    def value(self, depth: int = 0) -> Any:
        r = self.r
        if depth > 3 or r.random() < 0.6:
            return self.scalar()
        if r.random() < 0.5:
            return [self.value(depth + 1) for _ in range(r.randint(0, 4))]
        return {self.text(r.randint(0, 12)): self.value(depth + 1) for _ in range(r.randint(0, 4))}

    def deep(self) -> Any:
        levels = self.r.choice([10, 63, 64, 65, 100, 254, 255, 300, 1100])
        leaf: Any = self.r.choice([1, "x", {}, []])
        for _ in range(levels):
            leaf = [leaf] if self.r.random() < 0.5 else {"a": leaf}
        return leaf

    def odd_id(self) -> Any:
        r = self.r
        return r.choice(
            [
                None,
                True,
                1.5,
                -0.0,
                [],
                [1],
                {},
                {"id": 1},
                "",
                "x" * r.randint(100, 5000),
                "\x00",
                2**63,
                2**64,
                -(2**63) - 1,
                10**30,
                self.deep(),
            ]
        )

    # -- well-formed requests ------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        if self.focus and self.r.random() < 0.5:
            caps: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}
            return {META_VERSION: MODERN, META_CAPS: caps, META_INFO: {"name": "fuzz", "version": "1"}}
        caps = self.r.choice(
            [
                {},
                {"elicitation": {}},
                {"elicitation": {}, "sampling": {}, "roots": {}},
                {"extensions": {TASKS: {}}},
                {"elicitation": {}, "extensions": {TASKS: {}}},
            ]
        )
        return {META_VERSION: MODERN, META_CAPS: caps, META_INFO: {"name": "fuzz", "version": "1"}}

    def arguments(self, schema: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        properties = schema.get("properties") or {}
        for name, prop in properties.items():
            kind = prop.get("type") if isinstance(prop, dict) else None
            if "enum" in (prop or {}):
                out[name] = self.r.choice(prop["enum"])
            elif kind == "string":
                out[name] = self.text(self.r.randint(0, 20))
            elif kind == "integer":
                out[name] = self.r.randint(-5, 5)
            elif kind == "number":
                out[name] = self.r.random() * 3
            elif kind == "boolean":
                out[name] = self.r.random() < 0.5
            elif kind == "array":
                out[name] = []
            elif kind == "object":
                out[name] = {}
            else:
                out[name] = self.scalar()
        return out

    def params(self, method: str) -> dict[str, Any]:
        r, cat = self.r, self.catalogue
        if method == "tools/call":
            name = r.choice(cat["tools"]) if cat["tools"] and r.random() < 0.9 else self.text()
            return {"name": self.stored(name), "arguments": self.arguments(cat["schemas"].get(name, {}))}
        if method == "prompts/get":
            name = r.choice(cat["prompts"]) if cat["prompts"] and r.random() < 0.9 else self.text()
            arguments = {"arg1": self.stored("a"), "arg2": "b", "resourceUri": "test://static-text"}
            return {"name": self.stored(name), "arguments": arguments}
        if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            return {"uri": self.stored(r.choice(cat["resources"]) if r.random() < 0.8 else self.text())}
        if method == "completion/complete":
            if r.random() < 0.5:
                target = r.choice(cat["prompts"] or ["p"])
                ref = {"type": "ref/prompt", "name": self.stored(target)}
            else:
                target = r.choice(cat["templates"] or ["t"])
                ref = {"type": "ref/resource", "uri": self.stored(target)}
            # Mostly an argument with a completer, which may query with what was typed.
            name = r.choice([*cat.get("completions", {}).get(target, []), self.text(5)])
            return {"ref": ref, "argument": {"name": name, "value": self.stored(self.text(5))}}
        if method in ("tasks/get", "tasks/cancel"):
            return {"taskId": self.task_id()}
        if method == "tasks/update":
            return {"taskId": self.task_id(), "inputResponses": {self.stored("q"): {"action": "accept"}}}
        if method == "logging/setLevel":
            return {"level": r.choice(["debug", "info", "warning", "error", "nope"])}
        if method == "subscriptions/listen":
            wanted = {"toolsListChanged": True, "resourceSubscriptions": [self.stored("test://watched-resource")]}
            if r.random() < 0.3:
                wanted["taskIds"] = [self.task_id()]
            return {"notifications": wanted}
        if method == "initialize":
            return {
                "protocolVersion": r.choice([*LEGACY_VERSIONS, "1999-01-01"]),
                "capabilities": r.choice([{}, {"elicitation": {}, "roots": {"listChanged": True}}]),
                "clientInfo": {"name": "fuzz", "version": "1"},
            }
        if method == "notifications/cancelled":
            return {"requestId": r.randint(1, 50), "reason": "fuzz"}
        return {}

    def request(self, era: str) -> tuple[dict[str, Any], str]:
        methods = MODERN_METHODS if era == "modern" else LEGACY_METHODS
        focus = [m for m in self.focus if m in methods]
        method = self.r.choice(focus if focus and self.r.random() < 0.5 else methods)
        params = self.params(method)
        if era == "modern":
            params["_meta"] = self.meta()
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}, method

    # -- spoiling --------------------------------------------------------------------------

    def mutate(self, tree: Any, what: list[str]) -> Any:
        """Replace one node somewhere in the tree by a value of another type."""
        r = self.r
        if not isinstance(tree, (dict, list)) or not tree or r.random() < 0.25:
            what.append("wrong type")
            return r.choice([self.value(), self.deep(), self.scalar()])
        if isinstance(tree, dict):
            key = r.choice(list(tree))
            tree = dict(tree)
            if r.random() < 0.15:
                what.append(f"dropped {key}")
                del tree[key]
            else:
                tree[key] = self.mutate(tree[key], what)
            return tree
        index = r.randrange(len(tree))
        tree = list(tree)
        tree[index] = self.mutate(tree[index], what)
        return tree

    def spoil(self, message: dict[str, Any], what: list[str]) -> Any:
        r = self.r
        roll = r.random()
        if roll < 0.08:
            what.append("odd id")
            return {**message, "id": self.odd_id()}
        if roll < 0.12:
            what.append("unknown method")
            return {
                **message,
                "method": r.choice([self.text(), "tools/destroy", "rpc.discover", "", "notifications/x"]),
            }
        if roll < 0.16:
            what.append("batch")
            return [message, *(self.mutate(message, what) for _ in range(r.randint(0, 3)))]
        if roll < 0.20:
            what.append("notification")
            method = r.choice(NOTIFICATIONS)
            params = self.params(method)
            if r.random() < 0.5:
                params = self.mutate(params, what)
            return {"jsonrpc": "2.0", "method": method, "params": params}
        if roll < 0.24:
            what.append("response")
            reply_id = r.choice([f"mcp-django:{r.randint(1, 9)}:{self.text(12)}", self.odd_id(), 1])
            return {"jsonrpc": "2.0", "id": reply_id, "result": self.value()}
        if roll < 0.28:
            what.append("deep params")
            return {**message, "params": {**(message.get("params") or {}), "x": self.deep()}}
        if roll < 0.32:
            what.append("deep _meta")
            params = dict(message.get("params") or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": self.deep()}
            return {**message, "params": params}
        if roll < 0.36:
            what.append("no jsonrpc")
            return {k: v for k, v in message.items() if k != "jsonrpc"} | r.choice([{}, {"jsonrpc": "1.0"}])
        if roll < 0.75:
            out = message
            for _ in range(r.randint(1, 3)):
                out = self.mutate(out, what)
            return out
        return message  # well-formed: it must be answered too

    def raw_body(self, value: Any, what: list[str]) -> bytes:
        r = self.r
        roll = r.random()
        try:
            text = json.dumps(value)
        except (ValueError, RecursionError):
            text = "[" * 2000
        if roll < 0.04:
            what.append("truncated JSON")
            return text[: r.randint(0, max(0, len(text) - 1))].encode()
        if roll < 0.07:
            what.append("invalid UTF-8")
            data = bytearray(text.encode())
            data.insert(r.randrange(len(data) + 1), r.choice([0xFF, 0xC0, 0xED, 0x80]))
            return bytes(data)
        if roll < 0.09:
            what.append("lone surrogate")
            return text.replace('"2.0"', '"\\ud800"', 1).encode()
        if roll < 0.11:
            what.append("huge number")
            return text.replace(
                '"2.0"', '"2.0", "n": ' + r.choice(["1e400", "-1e400", "9" * 5000, "NaN", "1" * 400]), 1
            ).encode()
        if roll < 0.12:
            what.append("random bytes")
            return bytes(r.randrange(256) for _ in range(r.randint(0, 200)))
        if roll < 0.13:
            what.append("empty body")
            return b""
        if roll < 0.14:
            what.append("BOM")
            return b"\xef\xbb\xbf" + text.encode()
        if roll < 0.15:
            what.append("huge string")
            return text.replace('"2.0"', '"2.0", "s": "' + "x" * r.randint(10_000, 400_000) + '"', 1).encode()
        return text.encode()

    # -- headers ------------------------------------------------------------------------------

    def modern_headers(self, message: Any, what: list[str]) -> dict[str, str]:
        method = message.get("method") if isinstance(message, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": (method if _header_safe(method) else self.b64(method)) if isinstance(method, str) else "x",
        }
        if isinstance(params, dict):
            name = params.get(NAME_PARAMS.get(method, "name") if isinstance(method, str) else "name")
            if isinstance(name, str):
                headers["mcp-name"] = name if _header_safe(name) else self.b64(name)
        return self.spoil_headers(headers, what)

    def b64(self, value: str) -> str:
        return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode() + "?="

    def spoil_headers(self, headers: dict[str, str], what: list[str]) -> dict[str, str]:
        r = self.r
        # Values the HTTP parser itself refuses (control characters) never reach the application.
        headers = {k: v for k, v in headers.items() if _header_safe(v)}
        if r.random() > 0.25:
            return headers
        choice = r.randrange(9)
        if choice == 0:
            what.append("content-type")
            headers["content-type"] = r.choice(
                ["text/plain", "application/json; charset=latin-1", "", "application/jsonx"]
            )
        elif choice == 1:
            what.append("accept")
            headers["accept"] = r.choice(["text/html", "application/json", "text/event-stream", ""])
        elif choice == 2:
            what.append("version header")
            headers["mcp-protocol-version"] = r.choice(["2020-01-01", "", *LEGACY_VERSIONS, "=?base64?!!?="])
        elif choice == 3:
            what.append("method header")
            headers["mcp-method"] = r.choice(["tools/list", "", "=?base64?AAAA?=", "=?base64?/w==?="])
        elif choice == 4:
            what.append("name header")
            headers["mcp-name"] = r.choice(["", "=?base64?*?=", "x" * 3000, self.b64("\x00")])
        elif choice == 5:
            what.append("session header")
            headers["mcp-session-id"] = r.choice(["", "s1.x.y.z", "x" * 9000, "s1." + "A" * 50])
        elif choice == 6:
            what.append("origin")
            headers["origin"] = r.choice(["http://evil.example", "null", ""])
        elif choice == 7:
            what.append("dropped headers")
            for key in r.sample(sorted(headers), r.randint(1, len(headers))):
                del headers[key]
        else:
            what.append("param header")
            headers[f"mcp-param-{self.r.choice(['region', 'x', 'a-b'])}"] = self.r.choice(["1", "", "=?base64?AA?="])
        return {k: v for k, v in headers.items() if _header_safe(v)}

    # -- whole messages -------------------------------------------------------------------------

    def modern(self) -> Message:
        what: list[str] = []
        message, _method = self.request("modern")
        spoilt = self.spoil(message, what)
        body = self.raw_body(spoilt, what)
        return Message("modern", body, self.modern_headers(spoilt, what), what=what)

    def legacy(self, session: dict[str, str]) -> Message:
        r = self.r
        what: list[str] = []
        if r.random() < 0.06:
            return self.legacy_get(session, what)
        message, _method = self.request("legacy")
        spoilt = self.spoil(message, what)
        body = self.raw_body(spoilt, what)
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if not (isinstance(spoilt, dict) and spoilt.get("method") == "initialize"):
            headers.update(session)
        return Message("legacy", body, self.spoil_headers(headers, what), what=what)

    def legacy_get(self, session: dict[str, str], what: list[str]) -> Message:
        r = self.r
        headers = {"accept": "text/event-stream", **session}
        method = r.choice(["GET", "DELETE", "PUT", "OPTIONS"])
        if method == "GET":
            what.append("resume")
            headers["last-event-id"] = r.choice(["", "1.1@x", "999.3@" + self.text(10), "a.b@c", "1.-1@", "1" * 400])
        if method == "DELETE":
            what.append("delete (another session's id)")
            headers["mcp-session-id"] = r.choice(["s1.A.B.C", "x"])
        return Message("legacy", b"", self.spoil_headers(headers, what), http_method=method, what=what)

    def frame(self) -> tuple[str, list[str]]:
        """A websocket text frame (either era on one socket)."""
        what: list[str] = []
        era = self.r.choice(["modern", "legacy"])
        message, _method = self.request(era)
        spoilt = self.spoil(message, what)
        body = self.raw_body(spoilt, what)
        return body.decode("utf-8", "replace"), what


def _header_safe(value: str) -> bool:
    return value.isascii() and all(c >= " " and c != "\x7f" for c in value)
