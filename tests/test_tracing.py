"""OpenTelemetry traces of MCP calls (mcp_django.tracing), read from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.authtoken.models import Token

import tests.tracing_tools as tools
from mcp_django import tracing
from mcp_django.conf import mcp_settings
from mcp_django.pipeline import Pipeline
from mcp_django.protocol.revisions import Era
from mcp_django.registry import Registry
from mcp_django.testing import JSONRPCError, MCPClient
from tests.conftest import Raw, sdk_client

ROOT = Path(__file__).resolve().parent.parent
EXPORTER = InMemorySpanExporter()
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SECRET = "S3CRET-ARGUMENT-VALUE"


class _WhileRecording(SimpleSpanProcessor):
    """Exports only while a test of this module records: the provider is global, and the
    tests that run after these must neither keep spans in memory nor pay for exporting them."""

    recording = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.recording:
            super().on_end(span)


_PROCESSOR = _WhileRecording(EXPORTER)
_installed: list[bool] = []


def _install() -> None:
    # The global provider can be set once per process: reuse one another test set.
    if _installed:
        return
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(_PROCESSOR)
    _installed.append(True)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _install()
    EXPORTER.clear()
    _PROCESSOR.recording = True
    try:
        yield EXPORTER
    finally:
        _PROCESSOR.recording = False
        EXPORTER.clear()


def _calls(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name and s.kind == trace.SpanKind.SERVER]


def _one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def _texts(exporter: InMemorySpanExporter) -> str:
    """Every name and attribute value of every span and event, to look for what must not be there."""
    out: list[str] = []
    for span in exporter.get_finished_spans():
        out.append(span.name)
        out.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        for event in span.events:
            out.append(event.name)
            out.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
    return "\n".join(out)


def test_the_pipeline_is_traced_when_the_package_is_there() -> None:
    assert tracing.ENABLED
    # A stage of the default MCP_DJANGO["PIPELINE"], in every era's chains (inside the result,
    # database lifecycle and limits stages).
    chains = Pipeline(Registry()).chains
    assert tracing.trace in mcp_settings.PIPELINE
    chain = chains[Era.MODERN]["tools/call"]
    while chain.func is not tracing.trace:  # type: ignore[attr-defined]
        chain = chain.args[0]  # type: ignore[attr-defined]
    assert chain.func is tracing.trace  # type: ignore[attr-defined]
    assert chains[Era.LEGACY]["initialize"].func is tracing.trace  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_the_handshake_and_the_session_methods_are_traced(spans: InMemorySpanExporter) -> None:
    """initialize, ping and logging/setLevel go through the pipeline: each is a span."""
    client = MCPClient(revision="2025-11-25")
    client.request("ping")
    client.request("logging/setLevel", {"level": "error"})
    for method in ("initialize", "ping", "logging/setLevel"):
        (span,) = _calls(spans, method)
        assert span.attributes["mcp_django.era"] == "legacy"  # type: ignore[index]
        assert span.attributes["mcp_django.outcome"] == "completed"  # type: ignore[index]


@pytest.mark.django_db
def test_a_modern_call_without_trace_context_is_a_root_span(spans: InMemorySpanExporter) -> None:
    assert MCPClient().call_tool("tracetest_echo", {"text": SECRET}).text == f"echo {len(SECRET)}"
    (span,) = _calls(spans, "tools/call tracetest_echo")
    assert span.parent is None
    attributes = dict(span.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["mcp_django.handler"] == "tracetest_echo"
    assert attributes["mcp.protocol.version"] == "2026-07-28"
    assert attributes["mcp_django.principal"] == "anonymous"
    assert attributes["mcp_django.outcome"] == "completed"
    assert attributes["mcp_django.round"] == 0
    assert SECRET not in _texts(spans)


@pytest.mark.django_db
def test_traceparent_in_meta_makes_the_call_a_child(raw_inprocess: Raw, spans: InMemorySpanExporter) -> None:
    from tests.conftest import meta

    params = {"name": "tracetest_echo", "arguments": {"text": "hi"}, "_meta": meta(traceparent=TRACEPARENT)}
    response = raw_inprocess.post("tools/call", params)
    assert response.status_code == 200, response.text
    (span,) = _calls(spans, "tools/call tracetest_echo")
    assert span.parent is not None and span.parent.is_remote
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_ID


@pytest.mark.django_db
def test_the_http_traceparent_header_counts_when_meta_has_none(spans: InMemorySpanExporter) -> None:
    MCPClient(headers={"traceparent": TRACEPARENT}).call_tool("tracetest_echo", {"text": "hi"})
    (span,) = _calls(spans, "tools/call tracetest_echo")
    assert span.parent is not None
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_ID


@pytest.mark.django_db
@pytest.mark.parametrize("value", [12, {"a": 1}, "00-zz-yy-01", "x" * 5000])
def test_a_malformed_traceparent_starts_a_trace_of_its_own(
    raw_inprocess: Raw, spans: InMemorySpanExporter, value: Any
) -> None:
    from tests.conftest import meta

    params = {"name": "tracetest_echo", "arguments": {"text": "hi"}, "_meta": meta(traceparent=value)}
    response = raw_inprocess.post("tools/call", params)
    assert response.status_code == 200, response.text
    assert "result" in response.json(), response.text
    (span,) = _calls(spans, "tools/call tracetest_echo")
    assert span.parent is None


@pytest.mark.django_db
def test_a_replayed_flow_has_one_span_per_attempt_with_its_round(spans: InMemorySpanExporter) -> None:
    result = MCPClient().call_tool("tracetest_ask", {"secret": SECRET}, answer=lambda request: True)
    assert result.text == f"True-True-{len(SECRET)}"
    attempts = sorted(_calls(spans, "tools/call tracetest_ask"), key=lambda s: s.start_time or 0)
    assert [a.attributes["mcp_django.round"] for a in attempts] == [0, 1, 2]  # type: ignore[index]
    outcomes = [a.attributes["mcp_django.outcome"] for a in attempts]  # type: ignore[index]
    assert outcomes == ["input_required", "input_required", "completed"]
    # Each input_required names the round it opens: the next attempt's round.
    opened = [[dict(e.attributes or {}) for e in a.events if e.name == "mcp_django.input_required"] for a in attempts]
    assert opened[0] == [
        {"mcp_django.round": 1, "mcp_django.ask.keys": ("first",), "mcp_django.ask.methods": ("elicitation/create",)}
    ]
    assert opened[1][0]["mcp_django.round"] == 2 and opened[1][0]["mcp_django.ask.keys"] == ("second",)
    assert opened[2] == []
    texts = _texts(spans)
    assert SECRET not in texts and "requestState" not in texts


@pytest.mark.django_db
def test_a_refused_request_state_says_why_and_nothing_secret(raw_inprocess: Raw, spans: InMemorySpanExporter) -> None:
    user = User.objects.create_user("tracy", password="x")
    token = Token.objects.create(user=user).key
    auth = {"authorization": f"Token {token}"}
    first = raw_inprocess.call("tracetest_ask", {"secret": SECRET}, headers=auth).json()["result"]
    state = first["requestState"]
    # The same state with other arguments: refused (the state binds the params).
    refused = raw_inprocess.call(
        "tracetest_ask",
        {"secret": SECRET + "-other"},
        headers=auth,
        requestState=state,
        inputResponses={"first": {"action": "accept", "content": {"confirm": True}}},
    )
    assert "error" in refused.json(), refused.text
    spans_by_outcome = {s.attributes["mcp_django.outcome"]: s for s in _calls(spans, "tools/call tracetest_ask")}  # type: ignore[index]
    span = spans_by_outcome["refused"]
    assert span.attributes["mcp_django.refusal_reason"] == "wrong_params"  # type: ignore[index]
    assert span.attributes["mcp_django.principal"] == f"auth.user:{user.pk}"  # type: ignore[index]
    assert span.attributes["error.type"] == str(refused.json()["error"]["code"])  # type: ignore[index]
    assert span.status.status_code == trace.StatusCode.ERROR
    texts = _texts(spans)
    for secret in (SECRET, state, token, "inputResponses", "accept"):
        assert secret not in texts, secret


@pytest.mark.django_db
@pytest.mark.parametrize("tool", ["tracetest_ask", "tracetest_ask_sync"])
def test_a_legacy_ask_is_a_child_span_while_the_client_answers(spans: InMemorySpanExporter, tool: str) -> None:
    client = MCPClient(revision="2025-11-25")
    result = client.call_tool(tool, {"secret": SECRET}, answer=lambda request: True)
    assert result.text.startswith("True")
    (call,) = _calls(spans, f"tools/call {tool}")
    assert call.attributes["mcp.protocol.version"] == "2025-11-25"  # type: ignore[index]
    assert call.attributes["mcp_django.outcome"] == "completed"  # type: ignore[index]
    asks = [s for s in spans.get_finished_spans() if s.name == "mcp_django.ask elicitation/create"]
    assert len(asks) == (2 if tool == "tracetest_ask" else 1)
    for ask in asks:
        assert ask.parent is not None and ask.parent.span_id == call.context.span_id
        assert ask.context.trace_id == call.context.trace_id
        assert ask.attributes["mcp_django.outcome"] == "answered"  # type: ignore[index]
        assert call.start_time <= ask.start_time and ask.end_time <= call.end_time  # type: ignore[operator]
    assert SECRET not in _texts(spans)


@pytest.mark.django_db
@pytest.mark.parametrize("tool", ["tracetest_manual", "tracetest_amanual"])
def test_the_handlers_own_span_is_a_child_of_the_call(spans: InMemorySpanExporter, tool: str) -> None:
    MCPClient().call_tool(tool, {"label": "x"} if tool == "tracetest_manual" else {})
    (call,) = _calls(spans, f"tools/call {tool}")
    work = _one(spans, "tracetest.work" if tool == "tracetest_manual" else "tracetest.awork")
    assert work.parent is not None and work.parent.span_id == call.context.span_id


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_sdk_client_trace_reaches_a_sync_handler_in_the_worker_thread(
    live_url: str, spans: InMemorySpanExporter
) -> None:
    """The official SDK puts its span's context in _meta; the handler's span, made in a pool
    thread of the live server, is a grandchild of the test's."""
    tracer = trace.get_tracer("tests.tracing")
    with tracer.start_as_current_span("test.root") as root:
        async with sdk_client(live_url) as client:
            result = await client.call_tool("tracetest_manual", {"label": "hello"})
    assert result.content[0].text == "hello"
    assert tools.seen["thread"].startswith("mcp-django-")  # the worker pool's thread, not the loop's
    (call,) = _calls(spans, "tools/call tracetest_manual")
    assert call.context.trace_id == root.get_span_context().trace_id
    sdk_span = next(s for s in spans.get_finished_spans() if s.context.span_id == call.parent.span_id)  # type: ignore[union-attr]
    assert sdk_span.kind == trace.SpanKind.CLIENT  # the SDK's own span of the request
    work = _one(spans, "tracetest.work")
    assert work.parent is not None and work.parent.span_id == call.context.span_id


@pytest.mark.django_db
def test_an_error_is_an_outcome_without_the_message(spans: InMemorySpanExporter) -> None:
    with pytest.raises(JSONRPCError):
        MCPClient().request("prompts/get", {"name": f"no-such-prompt-{SECRET}"})
    (span,) = [s for s in spans.get_finished_spans() if s.attributes.get("mcp.method.name") == "prompts/get"]  # type: ignore[union-attr]
    assert span.attributes["mcp_django.outcome"] == "failed"  # type: ignore[index]
    assert span.attributes["error.type"] == "-32602"  # type: ignore[index]
    assert SECRET not in _texts(spans)


def test_without_opentelemetry_nothing_is_imported() -> None:
    """With the package unimportable, tracing is off, the pipeline unwrapped, and no
    opentelemetry module loaded."""
    code = textwrap.dedent(
        """
        import json, sys
        sys.modules["opentelemetry"] = None  # as if it were not installed
        import django
        django.setup()
        from mcp_django import tracing
        from mcp_django.pipeline import Pipeline
        from mcp_django.registry import Registry
        import mcp_django.asks.live, mcp_django.asks.replay, mcp_django.tasks.runner
        loaded = [name for name, module in sys.modules.items() if name.startswith("opentelemetry") and module]
        chain = Pipeline(Registry()).chains["modern"]["tools/list"]
        print(json.dumps({"enabled": tracing.ENABLED, "wrapped": "trace" in repr(chain),
                          "loaded": loaded}))
        """
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"enabled": False, "wrapped": False, "loaded": []}


def test_with_the_api_but_no_provider_a_call_makes_no_span() -> None:
    """The ``mcp`` SDK brings ``opentelemetry-api``: until a provider is set, a call reads no
    trace context (which would build its Django request) and starts no span."""
    code = textwrap.dedent(
        """
        import django
        django.setup()
        from django.apps import apps
        from django.conf import settings
        from django.core.management import call_command
        # The tables made from the models, not by the migrations (the suite's own test
        # database is migrated): a twentieth of the time.
        settings.MIGRATION_MODULES = {app.label: None for app in apps.get_app_configs()}
        call_command("migrate", run_syncdb=True, verbosity=0)
        from mcp_django import tracing
        from mcp_django.testing import MCPClient
        assert tracing.ENABLED and not tracing._configured()
        def read(call):
            raise AssertionError("the trace context was read with no provider set")
        tracing.carrier = read
        print(MCPClient().call_tool("echo", {"text": "hi"}).text)
        """
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "hi"


def test_with_no_provider_an_untraced_call_is_the_pipelines_own_awaitable() -> None:
    """No span, no wrapper: what the pipeline's ``handle`` returns is the chain's own
    awaitable, and the check reads no environment variable per call."""
    code = textwrap.dedent(
        """
        import os
        from mcp_django import tracing
        assert tracing.ENABLED and not tracing._configured()

        class Watched(dict):
            def __contains__(self, key):
                raise AssertionError("the environment was read on a call")
            __getitem__ = get = __contains__

        os.environ = Watched(os.environ)
        awaitable = object()
        assert tracing.trace(lambda call: awaitable, None) is awaitable
        print("untraced")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "OTEL_PYTHON_TRACER_PROVIDER"}
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "untraced"


@pytest.mark.django_db
def test_each_task_attempt_is_a_span_with_its_round(spans: InMemorySpanExporter) -> None:
    user = User.objects.create_user("tasker", password="x")
    result = MCPClient(user=user, tasks=True).call_tool(
        "confirm_delete", {"filename": SECRET}, answer=lambda request: True
    )
    assert result.task_states == ["working", "input_required", "working", "completed"]
    (created,) = _calls(spans, "tools/call confirm_delete")
    assert created.attributes["mcp_django.outcome"] == "task"  # type: ignore[index]
    attempts = sorted(
        (s for s in spans.get_finished_spans() if s.name == "mcp_django.task confirm_delete"),
        key=lambda s: s.start_time or 0,
    )
    assert [(a.attributes["mcp_django.round"], a.attributes["mcp_django.outcome"]) for a in attempts] == [  # type: ignore[index]
        (0, "input_required"),
        (1, "completed"),
    ]
    assert {a.attributes["mcp_django.task"] for a in attempts} == {result.task_id[:8]}  # type: ignore[index]
    assert {a.attributes["mcp_django.principal"] for a in attempts} == {f"auth.user:{user.pk}"}  # type: ignore[index]
    texts = _texts(spans)
    assert SECRET not in texts and result.task_id not in texts


def _docs_example() -> str:
    text = (ROOT / "docs" / "tracing.md").read_text()
    start = text.index("```python\n", text.index("## Testing it")) + len("```python\n")
    return text[start : text.index("```", start)]


def test_the_docs_example_runs_as_written(tmp_path: Path) -> None:
    """In a pytest process of its own: the example sets the global provider, as a project's
    conftest.py would, and its exporter would otherwise keep every later test's spans."""
    example = tmp_path / "test_docs_tracing_example.py"
    example.write_text(_docs_example())
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT)]
    # --no-migrations: its test database's tables made from the models, in a fraction of the
    # migrations' time (the suite's own test database is the one that checks the migrations).
    command += ["-c", str(ROOT / "pyproject.toml"), "--no-migrations", str(example)]
    # A run of its own: its test database and Redis prefixes are not this run's.
    env = {**os.environ, "MCP_TEST_RUN_ID": f"{os.environ.get('MCP_TEST_RUN_ID', os.getpid())}_docs"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_sdk_legacy_client_an_ask_carries_its_span_to_the_client(
    live_url: str, spans: InMemorySpanExporter
) -> None:
    """On a legacy session (the SDK's initialize handshake), the elicitation the server sends
    carries the ask span's traceparent in its _meta, and that span is the call's child."""
    import mcp.types as types

    received: list[dict[str, Any]] = []

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        received.append(params.model_dump(by_alias=True).get("_meta") or {})
        return types.ElicitResult(action="accept", content={"confirm": True})

    with trace.get_tracer("tests.tracing").start_as_current_span("test.root") as root:
        async with sdk_client(live_url, mode="legacy", elicitation_callback=on_elicit) as client:
            result = await client.call_tool("tracetest_ask_sync", {"secret": SECRET})
    assert result.content[0].text == f"True-{len(SECRET)}"
    (call,) = _calls(spans, "tools/call tracetest_ask_sync")
    assert call.context.trace_id == root.get_span_context().trace_id
    assert call.attributes["mcp.protocol.version"] != "2026-07-28"  # type: ignore[index]
    ask = _one(spans, "mcp_django.ask elicitation/create")
    assert ask.parent is not None and ask.parent.span_id == call.context.span_id
    trace_id, span_id = format(ask.context.trace_id, "032x"), format(ask.context.span_id, "016x")
    assert len(received) == 1 and received[0]["traceparent"].startswith(f"00-{trace_id}-{span_id}-")
    assert SECRET not in _texts(spans)
