"""Test your tools, prompts and resources in process (docs/testing.md): ``MCPClient``, real requests
through the project's ASGI application, only the socket missing, its sync work in the test's thread.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import itertools
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from asgiref.sync import sync_to_async

from . import lifecycle, signals
from .inprocess import serving
from .inprocess.answers import Answer, Answerer, InputRequest, NoAnswer, accept, answer_for, cancel, decline, error, raw
from .inprocess.serving import Response
from .lifecycle import HostThread, host_thread
from .protocol.revisions import (
    LATEST_MODERN,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_VERSION,
    MODERN_VERSIONS,
    NAMED_METHODS,
)

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser

    from .asks.guard import Write
    from .inprocess.httpx_transport import HttpxTransport

__all__ = [
    "Answer",
    "HostThread",
    "HttpxTransport",
    "InputRequest",
    "InputRoundsExceeded",
    "JSONRPCError",
    "MCPClient",
    "NoAnswer",
    "ReplayGuardWarning",
    "ReplayUnsafeWrite",
    "Result",
    "Round",
    "accept",
    "cancel",
    "decline",
    "error",
    "host_thread",
    "raw",
]

T = TypeVar("T")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
DEFAULT_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
CLIENT_INFO = {"name": "mcp-django-testclient", "version": "1"}


class InputRoundsExceeded(AssertionError):
    """The server wanted more rounds of input than the client's ``max_input_rounds``."""

    def __init__(self, limit: int, rounds: list[Round]) -> None:
        super().__init__(f"the server asked for input more than max_input_rounds={limit} times")
        self.limit = limit
        self.rounds = rounds


class JSONRPCError(Exception):
    """The server answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None, status: int = 200) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.status = status


class ReplayUnsafeWrite(AssertionError):
    """A handler wrote to the database in an attempt that ended with ``input_required``."""


class ReplayGuardWarning(UserWarning):
    """``replay_guard="warn"``: the same finding as :class:`ReplayUnsafeWrite`, as a warning."""


@dataclass
class Observer:
    """What the client learns from the server side of a call it drives (a :class:`signals.Observer`)."""

    guarding: bool
    runs: int = 0
    unsafe_writes: list[Write] = field(default_factory=list)
    # Legacy revisions: each server-to-client request's ask key, by its JSON-RPC id (the wire has none).
    ask_keys: dict[Any, str] = field(default_factory=dict)

    def ran(self, handler: Any) -> None:
        self.runs += 1

    def unsafe(self, writes: list[Write]) -> None:
        self.unsafe_writes.extend(writes)

    def asking(self, request_id: Any, key: str) -> None:
        self.ask_keys[request_id] = key


@dataclass
class Round:
    """One round of input: what the server asked, and what the client answered."""

    number: int
    input_requests: dict[str, InputRequest]
    responses: dict[str, Any] = field(default_factory=dict)

    @property
    def inputRequests(self) -> dict[str, Any]:  # noqa: N802 (the protocol's spelling)
        """The round's ``inputRequests`` as they came over the wire."""
        return {key: {"method": r.method, "params": r.params} for key, r in self.input_requests.items()}

    @property
    def keys(self) -> list[str]:
        return list(self.input_requests)


@dataclass
class Result:
    """A finished ``tools/call``, ``prompts/get`` or ``resources/read``."""

    method: str
    raw: dict[str, Any]
    rounds: list[Round] = field(default_factory=list)
    # How many times the handler ran: once per round plus one under 2026-07-28, once on legacy revisions.
    runs: int = 0
    notifications: list[dict[str, Any]] = field(default_factory=list)
    # Replay-unsafe writes the guard found (see docs/testing.md).
    unsafe_writes: list[Write] = field(default_factory=list)
    # A call that became an MCP task: its id, and every status it was seen in, in order.
    task_id: str | None = None
    task_states: list[str] = field(default_factory=list)

    @property
    def task_status(self) -> str | None:
        """The task's last status ("completed", "cancelled"), or None for a call that was no task."""
        return self.task_states[-1] if self.task_states else None

    @property
    def is_error(self) -> bool:
        return bool(self.raw.get("isError", False))

    @property
    def content(self) -> list[dict[str, Any]]:
        return list(self.raw.get("content") or [])

    @property
    def structured(self) -> Any:
        return self.raw.get("structuredContent")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.raw.get("messages") or [])

    @property
    def contents(self) -> list[dict[str, Any]]:
        return list(self.raw.get("contents") or [])

    @property
    def text(self) -> str:
        """The text of the result: a tool's text blocks, a prompt's messages, a resource's contents."""
        if self.method == "resources/read":
            return "".join(c.get("text", "") for c in self.contents if isinstance(c, dict))
        blocks = self.content if self.method == "tools/call" else [m.get("content") for m in self.messages]
        return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _header_value(value: str) -> str:
    """Header values outside ASCII travel base64-encoded (2026-07-28)."""
    if value.isascii() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


# The MCP Apps extension as a host declares it (the client's own words: no import of mcp_django.mcp_ui).
APPS_EXTENSION = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}


class MCPClient:
    """Talk MCP to the project, in process (docs/testing.md, "The client")."""

    def __init__(
        self,
        user: AbstractBaseUser | None = None,
        *,
        token: str | None = None,
        revision: str = LATEST_MODERN,
        max_input_rounds: int = 8,
        replay_guard: str = "error",
        capabilities: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        app: Any = None,
        path: str = "/mcp",
        tasks: bool = False,
        apps: bool = False,
        run_tasks: bool = True,
        task_timeout: float = 30.0,
    ) -> None:
        if revision not in MODERN_VERSIONS + LEGACY_VERSIONS:
            raise ValueError(f"unknown protocol revision {revision!r}")
        if replay_guard not in ("error", "warn", "off"):
            raise ValueError('replay_guard must be "error", "warn" or "off"')
        self.user = user
        self.token = token
        self.revision = revision
        self.max_input_rounds = max_input_rounds
        self.replay_guard = replay_guard
        self.capabilities = dict(DEFAULT_CAPABILITIES if capabilities is None else capabilities)
        # tasks: the opt-in to MCP tasks (docs/tasks.md), whose tasks call_tool drives to their end;
        # apps: a host that renders MCP Apps views (docs/apps.md), which sees app-only tools.
        extensions = {**({TASKS_EXTENSION: {}} if tasks else {}), **(APPS_EXTENSION if apps else {})}
        if extensions:
            self.capabilities["extensions"] = {**(self.capabilities.get("extensions") or {}), **extensions}
        # True: run a task's queued runs in the test's thread, whatever the TASKS backend; False: only poll.
        self.run_tasks = run_tasks
        self.task_timeout = task_timeout
        self.extra_headers = dict(headers or {})
        self.path = path
        self._app = app
        self._session_id: str | None = None
        self._ids = itertools.count(1)

    @property
    def legacy(self) -> bool:
        return self.revision in LEGACY_VERSIONS

    @property
    def app(self) -> Any:
        if self._app is None:
            self._app = serving.default_app()
        return self._app

    # -- who is calling ---------------------------------------------------------------

    @functools.cached_property
    def _auth(self) -> dict[str, str]:
        """The credentials' headers, made once, in the test's thread (logging in writes a session row):
        for ``user``, a session, else a DRF token, as the endpoint's authentication classes take."""
        headers: dict[str, str] = {}
        user: Any = self.user  # the stubs want AUTH_USER_MODEL
        if self.token is not None:
            headers["authorization"] = f"Token {self.token}"
        elif user is not None:
            from django.conf import settings
            from rest_framework import authentication

            from .auth import SessionAuthentication
            from .conf import mcp_settings
            from .protected_resource import endpoint_at

            # The endpoint's classes: its application's registry's (an MCPApplication), else the one at its path.
            registry = getattr(self.app, "registry", None) or endpoint_at(self.path)
            classes = (registry.settings if registry is not None else mcp_settings).AUTHENTICATION_CLASSES
            if any(issubclass(c, (SessionAuthentication, authentication.SessionAuthentication)) for c in classes):
                from django.test import Client

                client = Client()
                client.force_login(user)
                cookie = settings.SESSION_COOKIE_NAME
                headers["cookie"] = f"{cookie}={client.cookies[cookie].value}"
            elif any(issubclass(c, authentication.TokenAuthentication) for c in classes):
                from rest_framework.authtoken.models import Token

                headers["authorization"] = f"Token {Token.objects.get_or_create(user=user)[0].key}"
            else:
                raise ValueError(
                    "MCPClient(user=...) needs session or token authentication in the endpoint's "
                    "AUTHENTICATION_CLASSES; pass headers= with your own credentials instead"
                )
        return headers

    # -- the public API -------------------------------------------------------------------

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *, answer: Answerer = None) -> Result:
        params = {"name": name, "arguments": dict(arguments or {})}
        return self._sync(self._call, "tools/call", params, answer)

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None, *, answer: Answerer = None) -> Result:
        params = {"name": name, "arguments": dict(arguments or {})}
        return self._sync(self._call, "prompts/get", params, answer)

    def read_resource(self, uri: str, *, answer: Answerer = None) -> Result:
        return self._sync(self._call, "resources/read", {"uri": uri}, answer)

    def read_view(self, tool: str) -> Result:
        """The MCP Apps view of ``tool`` (docs/apps.md), read from the ``ui://`` resource its listing
        names; ``LookupError`` for a client without ``apps=True``, which is told of no view."""
        listed = {t["name"]: t for t in self.list_tools()}
        if tool not in listed:
            raise LookupError(f"no tool {tool!r} in this client's tools/list")
        uri = ((listed[tool].get("_meta") or {}).get("ui") or {}).get("resourceUri")
        if not uri:
            raise LookupError(
                f"tool {tool!r} has no view for this client (MCPClient(apps=True) declares the extension)"
            )
        return self.read_resource(uri)

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool this client may see: the ``tools`` of ``tools/list``, each a dict as on the wire."""
        return self._listing("tools/list", "tools")

    def list_prompts(self) -> list[dict[str, Any]]:
        return self._listing("prompts/list", "prompts")

    def list_resources(self) -> list[dict[str, Any]]:
        return self._listing("resources/list", "resources")

    def list_resource_templates(self) -> list[dict[str, Any]]:
        return self._listing("resources/templates/list", "resourceTemplates")

    def _listing(self, method: str, name: str) -> list[dict[str, Any]]:
        """Every page of a list method (a server that paginates gives a ``nextCursor``)."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            result = self.request(method, params)
            items.extend(result[name])
            cursor = result.get("nextCursor")
            if not cursor:
                return items
            params = {"cursor": cursor}

    def start_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``tools/call`` answered as it is: a ``CreateTaskResult`` is returned, not driven."""
        return self.request("tools/call", {"name": name, "arguments": dict(arguments or {})})

    def get_task(self, task_id: str) -> dict[str, Any]:
        return self.request("tasks/get", {"taskId": task_id})

    def update_task(self, task_id: str, responses: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("tasks/update", {"taskId": task_id, "inputResponses": dict(responses)})

    def cancel_task(self, task_id: str) -> dict[str, Any]:
        return self.request("tasks/cancel", {"taskId": task_id})

    def run_task(self, task_id: str) -> None:
        """Run the task's queued run now, in the test's thread (as a worker would)."""
        self._sync(lambda auth: _run_queued(task_id))

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Any request; its ``result`` (a JSON-RPC error raises :class:`JSONRPCError`)."""
        return self._sync(self._plain, method, dict(params or {}))

    # Each sync method, run thread-sensitively (in a TestCase: in the test's thread, on its transaction).
    acall_tool = sync_to_async(call_tool, thread_sensitive=True)
    aget_prompt = sync_to_async(get_prompt, thread_sensitive=True)
    aread_resource = sync_to_async(read_resource, thread_sensitive=True)
    alist_tools = sync_to_async(list_tools, thread_sensitive=True)
    alist_prompts = sync_to_async(list_prompts, thread_sensitive=True)
    alist_resources = sync_to_async(list_resources, thread_sensitive=True)
    arequest = sync_to_async(request, thread_sensitive=True)

    def close(self) -> None:
        """End a legacy session (DELETE); nothing to do under 2026-07-28."""
        if self._session_id is not None:
            session, self._session_id = self._session_id, None
            self._sync(self._delete, session)

    # -- driving ---------------------------------------------------------------------

    def _sync(self, coro_func: Callable[..., Awaitable[T]], *args: Any) -> T:
        # Before logging in (a database write), which would fail in a loop with Django's less helpful error.
        serving.refuse_in_loop()
        auth = self._auth
        if self.replay_guard != "off" and not self.legacy:
            from .asks import guard

            guard.install()  # async handlers' queries run here, in the test's thread
        return serving.run(lambda: coro_func(auth, *args))

    async def _call(self, auth: dict[str, str], method: str, params: dict[str, Any], answer: Answerer) -> Result:
        """A call to its end: 2026-07-28's rounds (or its task) retried with the answers; a legacy
        call answered in one request, the server's requests on its stream."""
        watching = Observer(guarding=self.replay_guard != "off")
        signals.observer.set(watching)
        result = Result(method, {})
        retry = params
        while True:
            reply, notes = await self._post(auth, method, retry, answer, result.rounds)
            result.notifications.extend(notes)
            result.raw = _result_of(reply)
            if result.raw.get("resultType") == "task" and method == "tools/call":
                result.task_id, result.task_states = result.raw["taskId"], [result.raw["status"]]
                await self._drive_task(auth, result.raw["taskId"], result, answer)
                break
            if result.raw.get("resultType") != "input_required":
                break
            await self._answer(result.raw.get("inputRequests") or {}, answer, result.rounds)
            retry = {**params, "inputResponses": result.rounds[-1].responses}
            if "requestState" in result.raw:
                retry["requestState"] = result.raw["requestState"]
        result.runs = watching.runs
        result.unsafe_writes = list(watching.unsafe_writes)
        if watching.unsafe_writes:
            lines = [f"  - {w}" for w in watching.unsafe_writes]
            lines += [f"To fix: {fix}." for fix in dict.fromkeys(w.fix for w in watching.unsafe_writes if w.fix)]
            report = "\n".join(lines)
            message = f"replay-unsafe database writes (the attempt then ended with input_required):\n{report}"
            if self.replay_guard == "error":
                raise ReplayUnsafeWrite(message)
            warnings.warn(message, ReplayGuardWarning, stacklevel=4)  # "warn" ("off" records none)
        return result

    async def _plain(self, auth: dict[str, str], method: str, params: dict[str, Any]) -> dict[str, Any]:
        return _result_of((await self._post(auth, method, params))[0])

    async def _post(
        self,
        auth: dict[str, str],
        method: str,
        params: dict[str, Any],
        answer: Answerer = None,
        rounds: list[Round] | None = None,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """One request: its response, and the notifications sent before it. On a legacy revision the
        server's requests on the call's stream are answered meanwhile (each a round in ``rounds``)."""
        request_id = next(self._ids)
        if self.legacy:
            await self._initialize(auth)
        else:
            meta = {META_VERSION: self.revision, META_CAPABILITIES: self.capabilities, META_CLIENT_INFO: CLIENT_INFO}
            params = {**params, "_meta": {**meta, **(params.get("_meta") or {})}}
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        rounds = [] if rounds is None else rounds
        notifications: list[dict[str, Any]] = []
        failed: Exception | None = None
        async with self._exchange(auth, body) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                return await _json_or_raise(response), notifications
            async for message in response.events():
                if "method" in message and "id" in message:
                    if failed is None:  # else the call is being cancelled: no more answers
                        failed = await self._answer_server_request(auth, request_id, message, answer, rounds)
                elif "method" in message:
                    notifications.append(message)
                elif message.get("id") == request_id:
                    if failed is not None:
                        raise failed
                    message.setdefault("_status", response.status)
                    return message, notifications
            if failed is not None:
                raise failed
            raise AssertionError(f"the stream for {method} ended without a response")

    async def _answer(self, entries: dict[str, Any], answer: Answerer, rounds: list[Round]) -> dict[str, Answer]:
        """A new round of input: the test's answer to each of the server's requests (by key)."""
        if len(rounds) >= self.max_input_rounds:
            raise InputRoundsExceeded(self.max_input_rounds, rounds)
        requests = {
            key: InputRequest(key, entry.get("method", ""), dict(entry.get("params") or {}))
            for key, entry in entries.items()
        }
        this_round = Round(len(rounds) + 1, requests)
        rounds.append(this_round)
        answers: dict[str, Answer] = {}
        for key, request in requests.items():
            given = answers[key] = await sync_to_async(answer_for, thread_sensitive=True)(answer, request)
            if given.result is None and not self.legacy:
                raise TypeError(f"an error answer is for legacy revisions only (input request {key!r})")
            this_round.responses[key] = given.result if given.error is None else given.error
        return answers

    def _exchange(
        self, auth: dict[str, str], message: dict[str, Any]
    ) -> contextlib.AbstractAsyncContextManager[Response]:
        """POST ``message`` with the headers of this client's revision."""
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **auth}
        if not self.legacy:
            method, params = message["method"], message["params"]
            headers.update({"mcp-protocol-version": self.revision, "mcp-method": method})
            field = NAMED_METHODS.get(method)  # the name, the URI, the task id
            if field is not None and isinstance(params.get(field), str):
                headers["mcp-name"] = _header_value(params[field])
            if method == "tools/call":
                headers.update(_param_headers(params.get("name"), params.get("arguments") or {}))
        elif self._session_id is not None:
            headers["mcp-session-id"] = self._session_id
            headers["mcp-protocol-version"] = self.revision
        return serving.exchange(self.app, "POST", self.path, {**headers, **self.extra_headers}, orjson.dumps(message))

    # -- 2026-07-28 ------------------------------------------------------------------

    async def _drive_task(self, auth: dict[str, str], task_id: str, done: Result, answer: Answerer) -> None:
        """Poll the task to its end (``done``: the call's result so far), answering its input requests
        by ``tasks/update``."""
        states = done.task_states
        deadline = time.monotonic() + self.task_timeout
        while True:
            task = await self._plain(auth, "tasks/get", {"taskId": task_id})
            status = task["status"]
            if status != states[-1]:
                states.append(status)
            if status in ("completed", "cancelled"):
                done.raw = task["result"] if status == "completed" else {"content": []}
                return
            if status == "failed":
                error = task.get("error") or {}
                failure = JSONRPCError(int(error.get("code", -32603)), error.get("message", ""), error.get("data"))
                failure.task_id, failure.task_states = task_id, states  # type: ignore[attr-defined]
                raise failure
            if status == "input_required":
                await self._answer(task.get("inputRequests") or {}, answer, done.rounds)
                responses = done.rounds[-1].responses
                await self._plain(auth, "tasks/update", {"taskId": task_id, "inputResponses": responses})
                continue
            if self.run_tasks:
                await _run_queued(task_id)
            else:
                await asyncio.sleep(0.05)
            if time.monotonic() > deadline:
                raise AssertionError(f"task {task_id} is still {status!r} after {self.task_timeout} s")

    # -- legacy revisions ----------------------------------------------------------------

    async def _notify(self, auth: dict[str, str], method: str, params: dict[str, Any] | None = None) -> None:
        note = {"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})}
        async with self._exchange(auth, note):
            pass  # answered at once (202)

    async def _initialize(self, auth: dict[str, str]) -> None:
        if self._session_id is not None:
            return
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "initialize",
            "params": {"protocolVersion": self.revision, "capabilities": self.capabilities, "clientInfo": CLIENT_INFO},
        }
        async with self._exchange(auth, body) as response:
            _result_of(await _json_or_raise(response))
            session = response.headers.get("mcp-session-id")
            if not session:
                raise AssertionError("initialize was answered without an Mcp-Session-Id")
            self._session_id = session
        await self._notify(auth, "notifications/initialized")

    async def _answer_server_request(
        self, auth: dict[str, str], call_id: int, message: dict[str, Any], answer: Answerer, rounds: list[Round]
    ) -> Exception | None:
        """Answer a server-to-client request of the call ``call_id``; if the test cannot, cancel
        the call and return why (raised once the server has ended it)."""
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if message["method"] == "ping":
            reply["result"] = {}
        else:
            # The ask's key, as the server told this client (2026-07-28 sends it; here the wire has none).
            watching = signals.observer.get()
            key = str(message["id"])
            if isinstance(watching, Observer):
                key = watching.ask_keys.get(message["id"], key)
            try:
                given = (await self._answer({key: message}, answer, rounds))[key]
            except (InputRoundsExceeded, NoAnswer, TypeError) as exc:
                # Cancelled at once rather than leave the handler waiting for ASK_TIMEOUT; its
                # cleanup is served by this thread while the call is still open.
                reason = "too many rounds of input" if isinstance(exc, InputRoundsExceeded) else "no answer"
                await self._notify(auth, "notifications/cancelled", {"requestId": call_id, "reason": reason})
                return exc
            if given.error is not None:
                reply["error"] = given.error
            else:
                reply["result"] = given.result
        async with self._exchange(auth, reply) as response:
            if response.status != 202:
                raise AssertionError(f"the server refused the answer to {message['method']}: {await response.body()!r}")
        return None

    async def _delete(self, auth: dict[str, str], session: str) -> None:
        headers = {**auth, "mcp-session-id": session, "mcp-protocol-version": self.revision, **self.extra_headers}
        async with serving.exchange(self.app, "DELETE", self.path, headers, b""):
            pass


async def _json_or_raise(response: Response) -> dict[str, Any]:
    body = await response.body()
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise AssertionError(f"HTTP {response.status} with a body that is not JSON: {body[:500]!r}") from None
    if not isinstance(message, dict):
        raise AssertionError(f"HTTP {response.status}: not a JSON-RPC message: {body[:500]!r}")
    message.setdefault("_status", response.status)
    return message


async def _run_queued(task_id: str) -> None:
    # The tasks extension's runner, which it hooks in when registered (a task exists only then).
    if lifecycle.run_queued_task is None:
        raise RuntimeError(f"task {task_id}: the tasks extension is not registered (MCP_DJANGO['EXTENSIONS'])")
    await lifecycle.run_queued_task(task_id)


def _result_of(message: dict[str, Any]) -> dict[str, Any]:
    error = message.get("error")
    if error is not None:
        raise JSONRPCError(error.get("code"), error.get("message", ""), error.get("data"), message.get("_status", 200))
    return message["result"]


def _param_headers(name: Any, arguments: dict[str, Any]) -> dict[str, str]:
    """``Mcp-Param-*`` headers for arguments the tool's schema mirrors (x-mcp-header)."""
    from .registry import mcp

    tool = mcp.tools.get(name) if isinstance(name, str) else None
    properties = (tool.input_schema.get("properties") if tool else None) or {}
    out: dict[str, str] = {}
    for arg, prop in properties.items():
        header = prop.get("x-mcp-header") if isinstance(prop, dict) else None
        if isinstance(header, str) and arg in arguments:
            value = arguments[arg]
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            out["mcp-param-" + header.lower()] = _header_value(text)
    return out


def __getattr__(name: str) -> object:
    # Imported on first use: it needs httpx, which only tests need.
    if name == "HttpxTransport":
        from .inprocess.httpx_transport import HttpxTransport

        return HttpxTransport
    raise AttributeError(name)
