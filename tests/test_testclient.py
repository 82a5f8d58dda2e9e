"""The in-process test client (mcp_django.testing) inside django.test.TestCase, in both eras.

The suite runs these on SQLite and on PostgreSQL (DATABASE_URL): data made in
setUp must be what the handlers, authentication and audit rows see.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import Permission, User
from django.test import TestCase
from rest_framework.authtoken.models import Token

import tests.modern_tools  # noqa: F401 - registers the modtest_ tools
import tests.testclient_tools as tools
from mcp_django.models import AuditEvent
from mcp_django.protocol import legacy
from mcp_django.testing import (
    InputRoundsExceeded,
    JSONRPCError,
    MCPClient,
    NoAnswer,
    ReplayGuardWarning,
    ReplayUnsafeWrite,
    cancel,
    decline,
    error,
)
from project.shop.models import Product
from tests import legacy_fixtures as fx
from tests.conftest import mcp_settings

LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


class ClientBasics(TestCase):
    def setUp(self) -> None:
        self.alice = User.objects.create_user("alice", password="pw")
        self.mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.50"), stock=7)

    def test_sync_tool_sees_setup_data_and_answers_a_round(self) -> None:
        result = MCPClient(user=self.alice).call_tool("tctest_stock", {"sku": "MUG-01"}, answer=lambda req: True)
        assert result.text == "Mug: 7"
        assert not result.is_error
        assert len(result.rounds) == 1
        assert list(result.rounds[0].inputRequests) == ["show"]
        request = result.rounds[0].input_requests["show"]
        assert (request.type, request.message) == ("confirm", "Show the stock of Mug?")
        assert result.rounds[0].inputRequests["show"]["method"] == "elicitation/create"
        assert result.runs == 2  # once per round, plus the attempt that completes

    def test_async_tool_sees_setup_data(self) -> None:
        result = MCPClient(user=self.alice).call_tool("tctest_astock", {"sku": "MUG-01"}, answer={"show": True})
        assert result.text == "Mug: 7"
        assert result.runs == 2

    def test_decline_and_answers_by_message(self) -> None:
        client = MCPClient()
        assert client.call_tool("tctest_stock", {"sku": "MUG-01"}, answer=lambda r: decline()).text == "not shown"
        by_message = {"Show the stock of Mug?": False}
        assert client.call_tool("tctest_astock", {"sku": "MUG-01"}, answer=by_message).text == "not shown"
        assert client.call_tool("modtest_url", answer=lambda r: cancel()).text == "cancel"

    def test_token_and_session_and_anonymous(self) -> None:
        token = Token.objects.create(user=self.alice)
        assert MCPClient(token=token.key).call_tool("whoami").structured["username"] == "alice"
        assert MCPClient(user=self.alice).call_tool("whoami").structured["username"] == "alice"
        assert MCPClient().call_tool("whoami").structured == {"principal": "anonymous", "username": None}

    def test_a_bad_token_is_refused_with_401(self) -> None:
        with pytest.raises(JSONRPCError) as caught:
            MCPClient(token="nope").list_tools()
        assert caught.value.status == 401

    def test_permissions_decide_what_is_listed_and_readable(self) -> None:
        client = MCPClient(user=self.alice)
        assert "shop://catalogue" not in [r["uri"] for r in client.list_resources()]
        with pytest.raises(JSONRPCError) as caught:
            client.read_resource("shop://catalogue")
        assert caught.value.code == -32602
        self.alice.user_permissions.add(Permission.objects.get(codename="view_product"))
        result = MCPClient(user=User.objects.get(pk=self.alice.pk)).read_resource("shop://catalogue")
        assert '"sku":"MUG-01"' in result.text.replace(" ", "")

    def test_resource_templates_are_listed(self) -> None:
        client = MCPClient()
        uris = [t["uriTemplate"] for t in client.list_resource_templates()]
        assert {"modtest://secret/{name}", "tctest://stock/{sku}"} <= set(uris)
        assert uris == [t["uriTemplate"] for t in client.request("resources/templates/list")["resourceTemplates"]]

    def test_prompt_and_resource_that_ask(self) -> None:
        client = MCPClient()
        prompt = client.get_prompt("modtest_prompt", {"topic": "tea"}, answer={"tone": {"tone": "dry"}})
        assert prompt.text == "Write about tea in a dry tone."
        assert len(prompt.rounds) == 1
        resource = client.read_resource("modtest://secret/x", answer={"read": True})
        assert resource.text == "secret x"
        assert "modtest_prompt" in [p["name"] for p in client.list_prompts()]
        assert "echo" in [t["name"] for t in client.list_tools()]

    def test_sampling_roots_and_parallel_asks_in_one_round(self) -> None:
        answers = {"name": {"name": "Ada"}, "model": "hello"}
        result = MCPClient().call_tool("modtest_gather", answer=answers)
        assert result.text == "Ada/hello"
        assert len(result.rounds) == 1
        assert sorted(result.rounds[0].keys) == ["model", "name"]
        assert result.rounds[0].input_requests["model"].type == "sample"

    def test_no_answer_fails_with_the_ask_named(self) -> None:
        with pytest.raises(NoAnswer, match=r"Show the stock of Mug\?"):
            MCPClient().call_tool("tctest_stock", {"sku": "MUG-01"})
        with pytest.raises(NoAnswer, match="'show'"):
            MCPClient().call_tool("tctest_stock", {"sku": "MUG-01"}, answer={"other": True})

    def test_audit_rows_are_written_in_the_test_transaction(self) -> None:
        # The production default (background writer) too: the client writes rows here.
        with mcp_settings(AUDIT={"ASYNC_WRITES": True}):
            MCPClient(user=self.alice).call_tool("tctest_stock", {"sku": "MUG-01"}, answer={"show": True})
        rows = list(AuditEvent.objects.filter(target="tctest_stock").order_by("id").values_list("kind", "user_id"))
        assert rows == [("round", self.alice.pk), ("completed", self.alice.pk)]

    def test_unknown_tool_is_a_jsonrpc_error(self) -> None:
        with pytest.raises(JSONRPCError) as caught:
            MCPClient().call_tool("no_such_tool")
        assert caught.value.code == -32602

    def test_tool_errors_are_results(self) -> None:
        result = MCPClient().call_tool("echo", {"text": 3})
        assert result.is_error and "Invalid arguments" in result.text


class RoundCap(TestCase):
    def test_eight_rounds_pass_the_ninth_raises(self) -> None:
        client = MCPClient()
        assert client.call_tool("modtest_rounds", {"n": 8}, answer=lambda r: True).text == "8 rounds"
        with pytest.raises(InputRoundsExceeded) as caught:
            client.call_tool("modtest_rounds", {"n": 9}, answer=lambda r: True)
        assert caught.value.limit == 8
        assert len(caught.value.rounds) == 8

    def test_a_lower_cap(self) -> None:
        client = MCPClient(max_input_rounds=2)
        assert client.call_tool("modtest_rounds", {"n": 2}, answer=lambda r: True).text == "2 rounds"
        with pytest.raises(InputRoundsExceeded):
            client.call_tool("modtest_rounds", {"n": 3}, answer=lambda r: True)

    def test_legacy_cap_counts_server_requests(self) -> None:
        client = MCPClient(revision="2025-11-25", max_input_rounds=1)
        with pytest.raises(InputRoundsExceeded):
            client.call_tool("legacytest_parallel", answer=lambda r: {"name": "x"} if r.type == "elicit" else "hi")
        client.close()


class Legacy(TestCase):
    def setUp(self) -> None:
        fx.reset()
        self.alice = User.objects.create_user("alice", password="pw")
        Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.50"), stock=7)

    def test_every_legacy_revision_runs_the_handler_once(self) -> None:
        for revision in LEGACY:
            with self.subTest(revision=revision):
                client = MCPClient(user=self.alice, revision=revision)
                result = client.call_tool("tctest_stock", {"sku": "MUG-01"}, answer=lambda r: True)
                assert result.text == "Mug: 7"
                assert result.runs == 1
                assert len(result.rounds) == 1
                assert next(iter(result.rounds[0].input_requests.values())).type == "confirm"
                client.close()

    def test_close_ends_the_session_with_the_clients_own_headers(self) -> None:
        # Credentials given only by headers=: the DELETE carries them too, or another principal's
        # DELETE is refused and the session stays open.
        token = Token.objects.create(user=self.alice).key
        client = MCPClient(revision="2025-11-25", headers={"authorization": f"Token {token}"})
        assert client.call_tool("tctest_stock", {"sku": "MUG-01"}, answer=lambda r: True).text == "Mug: 7"
        record = legacy.open_session(client._session_id or "")
        assert record is not None
        client.close()
        assert async_to_sync(legacy.session_status)(record)[0]

    def test_async_tool_and_parallel_asks(self) -> None:
        client = MCPClient(revision="2025-11-25")
        assert client.call_tool("tctest_astock", {"sku": "MUG-01"}, answer=lambda r: True).text == "Mug: 7"
        answers = {"elicit": {"name": "Ada"}, "sample": "hi", "roots": ["file:///a", "file:///b"]}
        result = client.call_tool("legacytest_parallel", answer=lambda r: answers[r.type])
        assert result.text == "Ada|hi|2|yes"
        assert len(result.rounds) == 3
        assert fx.RUNS["legacytest_parallel"] == 1 and result.runs == 1
        client.close()

    def test_sync_handler_waiting_while_the_answer_needs_the_test_thread(self) -> None:
        # No principal cache: authenticating the answer's POST is sync work that must
        # run in the test's thread while the sync handler blocks there.
        with mcp_settings(AUTH_CACHE_SECONDS=0):
            client = MCPClient(user=self.alice, revision="2025-06-18")
            result = client.call_tool(
                "legacytest_ask_all",
                answer=lambda r: {"name": "Bo"} if r.type == "elicit" else ["x"] if r.type == "roots" else "yo",
            )
            assert result.text == "Bo|yo|1"
            client.close()
        asks = AuditEvent.objects.filter(kind="ask", user=self.alice).count()
        assert asks == 3

    def test_error_answer_and_log_notifications(self) -> None:
        client = MCPClient(revision="2025-11-25")
        result = client.call_tool("legacytest_error", answer=lambda r: error(-32000, "no thanks"))
        assert result.text == "client error -32000: no thanks"
        logged = client.call_tool("legacytest_log")
        assert logged.text == "logged"
        assert [n["method"] for n in logged.notifications] == ["notifications/message", "notifications/message"]
        client.close()

    def test_prompt_and_resource(self) -> None:
        client = MCPClient(revision="2025-11-25")
        assert client.get_prompt("modtest_prompt", {"topic": "x"}, answer=lambda r: {"tone": "wry"}).text.endswith(
            "wry tone."
        )
        assert client.read_resource("modtest://secret/y", answer=lambda r: True).text == "secret y"
        client.close()


class KeysInBothEras(TestCase):
    """answer={key: ...} means the same in both eras: the ask's key, not a legacy request's internal id."""

    def setUp(self) -> None:
        fx.reset()
        Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.50"), stock=7)

    def test_answers_by_key_on_every_revision(self) -> None:
        for revision in ("2026-07-28", *LEGACY):
            with self.subTest(revision=revision):
                client = MCPClient(revision=revision)
                result = client.call_tool("tctest_stock", {"sku": "MUG-01"}, answer={"show": True})
                assert result.text == "Mug: 7"
                assert result.rounds[0].keys == ["show"]
                client.close()

    def test_derived_keys_are_the_same_in_both_eras(self) -> None:
        keys = {}
        for revision in ("2026-07-28", "2025-11-25"):
            client = MCPClient(revision=revision)
            result = client.call_tool("legacytest_confirm", answer=lambda r: True)
            assert result.text == "confirmed"
            keys[revision] = [key for r in result.rounds for key in r.keys]
            client.close()
        assert keys["2025-11-25"] == keys["2026-07-28"] and keys["2026-07-28"][0].startswith("confirm-")
        # So a derived key answers in both eras too.
        for revision in ("2026-07-28", "2025-11-25"):
            client = MCPClient(revision=revision)
            assert client.call_tool("legacytest_confirm", answer={keys["2026-07-28"][0]: True}).text == "confirmed"
            client.close()

    def test_a_missing_answer_fails_at_once_naming_the_ask_and_leaves_nothing_behind(self) -> None:
        import gc
        import time

        for revision in ("2026-07-28", "2025-11-25"):
            # A bound far beyond what a loaded machine takes to fail the call, far below the ask's timeout.
            with self.subTest(revision=revision), mcp_settings(ASK_TIMEOUT=120):
                client = MCPClient(revision=revision)
                with self.assertNoLogs("asyncio", "ERROR"):
                    started = time.monotonic()
                    with pytest.raises(NoAnswer, match=r"'show'.*Show the stock of Mug\?"):
                        client.call_tool("tctest_stock", {"sku": "MUG-01"}, answer={"other": True})
                    took = time.monotonic() - started
                    gc.collect()  # a task whose exception nobody retrieved is reported when collected
                assert took < 60, "the call waited for the ask to time out"
                # The session is still usable afterwards.
                assert client.call_tool("tctest_stock", {"sku": "MUG-01"}, answer={"show": True}).text == "Mug: 7"
                client.close()


class AsyncTests(TestCase):
    """Django runs these coroutines with async_to_sync: thread-sensitive work comes to the test's thread."""

    def setUp(self) -> None:
        self.alice = User.objects.create_user("alice", password="pw")
        Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.50"), stock=7)

    async def test_acall_tool_modern(self) -> None:
        client = MCPClient(user=self.alice)
        result = await client.acall_tool("tctest_astock", {"sku": "MUG-01"}, answer=lambda r: True)
        assert result.text == "Mug: 7" and len(result.rounds) == 1
        assert (await client.acall_tool("whoami")).structured["username"] == "alice"
        assert "echo" in [t["name"] for t in await client.alist_tools()]

    async def test_every_async_method_answers_as_its_sync_twin(self) -> None:
        client = MCPClient(user=self.alice)
        prompt = await client.aget_prompt("modtest_prompt", {"topic": "tea"}, answer={"tone": {"tone": "dry"}})
        assert prompt.text == "Write about tea in a dry tone." and len(prompt.rounds) == 1
        resource = await client.aread_resource("modtest://secret/x", answer={"read": True})
        assert resource.text == "secret x" and len(resource.rounds) == 1
        assert "modtest_prompt" in [p["name"] for p in await client.alist_prompts()]
        resources = await client.alist_resources()
        assert resources == await sync_to_async(client.list_resources)()
        assert "shop://catalogue" not in [r["uri"] for r in resources]  # alice may not view products
        listed = await client.arequest("resources/templates/list")
        assert "tctest://stock/{sku}" in [t["uriTemplate"] for t in listed["resourceTemplates"]]
        with pytest.raises(JSONRPCError) as caught:
            await client.arequest("no/such/method")
        assert caught.value.code == -32601

    async def test_sync_methods_in_a_running_loop_say_so_before_touching_the_database(self) -> None:
        # MCPClient(user=...) logs in on first use (a database write): inside a running loop that
        # raised SynchronousOnlyOperation instead of the client's own advice.
        client = MCPClient(user=self.alice)
        with pytest.raises(RuntimeError, match=r"await client.acall_tool"):
            client.call_tool("whoami")
        with pytest.raises(RuntimeError, match=r"a-prefixed"):
            client.list_tools()
        assert (await client.acall_tool("whoami")).structured["username"] == "alice"

    async def test_acall_tool_legacy(self) -> None:
        client = MCPClient(user=self.alice, revision="2025-11-25")
        result = await client.acall_tool("tctest_stock", {"sku": "MUG-01"}, answer=lambda r: True)
        assert result.text == "Mug: 7" and result.runs == 1

    async def test_sync_methods_refuse_to_block_the_loop(self) -> None:
        with pytest.raises(RuntimeError, match="acall_tool"):
            MCPClient().call_tool("echo", {"text": "x"})


class ReplayGuard(TestCase):
    def setUp(self) -> None:
        self.mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.50"), stock=0)

    def test_write_before_ask_fails_the_test(self) -> None:
        with pytest.raises(ReplayUnsafeWrite) as caught:
            MCPClient().call_tool("tctest_restock_early", {"sku": "MUG-01"}, answer=lambda r: True)
        message = str(caught.value)
        assert "tool 'tctest_restock_early'" in message
        assert "UPDATE" in message
        assert "testclient_tools.py:" in message and "in tctest_restock_early" in message
        assert "register the handler with atomic=True" in message  # a sync handler can be atomic

    def test_async_write_before_ask_is_found_too(self) -> None:
        with pytest.raises(ReplayUnsafeWrite) as caught:
            MCPClient().call_tool("tctest_arestock_early", {"sku": "MUG-01"}, answer=lambda r: True)
        # The line of the async handler that awaited the write, though the query ran in another thread.
        assert "testclient_tools.py:" in str(caught.value) and "in tctest_arestock_early: UPDATE" in str(caught.value)
        # atomic= refuses an async handler (TypeError): the advice must not suggest it.
        assert "register the handler with atomic=True" not in str(caught.value)
        assert "make the write idempotent" in str(caught.value) and "atomic=True needs a sync handler" in str(
            caught.value
        )

    def test_server_side_hint_fits_the_handler(self) -> None:
        with self.settings(DEBUG=True), self.assertLogs("mcp_django.replay", "WARNING") as logs:
            MCPClient(replay_guard="off").call_tool("tctest_arestock_early", {"sku": "MUG-01"}, answer=lambda r: True)
            MCPClient(replay_guard="off").call_tool("tctest_restock_early", {"sku": "MUG-01"}, answer=lambda r: True)
        async_line, sync_line = logs.output
        assert (
            "tool 'tctest_arestock_early'" in async_line and "register the handler with atomic=True" not in async_line
        )
        assert "make the write idempotent" in async_line
        assert "tool 'tctest_restock_early'" in sync_line and "register the handler with atomic=True" in sync_line

    def test_warn_and_off(self) -> None:
        with pytest.warns(ReplayGuardWarning):
            result = MCPClient(replay_guard="warn").call_tool(
                "tctest_restock_early", {"sku": "MUG-01"}, answer=lambda r: True
            )
        assert result.text == "told"
        assert len(result.unsafe_writes) == 1
        assert result.unsafe_writes[0].statement.startswith("UPDATE")
        self.mug.refresh_from_db()
        assert self.mug.stock == 2  # the write ran in both attempts: what the guard is about
        result = MCPClient(replay_guard="off").call_tool(
            "tctest_restock_early", {"sku": "MUG-01"}, answer={"tell": True}
        )
        assert result.unsafe_writes == []

    def test_write_after_the_last_ask_is_not_flagged(self) -> None:
        result = MCPClient().call_tool("tctest_restock_late", {"sku": "MUG-01"}, answer=lambda r: True)
        assert result.text == "restocked" and result.unsafe_writes == []
        self.mug.refresh_from_db()
        assert self.mug.stock == 1

    def test_legacy_is_not_flagged(self) -> None:
        client = MCPClient(revision="2025-11-25")
        assert client.call_tool("tctest_restock_early", {"sku": "MUG-01"}, answer=lambda r: True).text == "told"
        client.close()

    def test_atomic_keeps_only_the_final_attempts_writes(self) -> None:
        tools.runs.clear()
        result = MCPClient().call_tool("tctest_restock_atomic", {"sku": "MUG-01"}, answer=lambda r: True)
        assert result.text == "restocked once"
        assert result.runs == 3 == tools.runs["atomic"]
        assert result.unsafe_writes == []
        self.mug.refresh_from_db()
        assert self.mug.stock == 1

    def test_atomic_prompt_and_resource(self) -> None:
        client = MCPClient()
        assert client.get_prompt("tctest_atomic_prompt", {"sku": "MUG-01"}, answer=lambda r: True).text.endswith(
            "kindly."
        )
        assert client.read_resource("tctest://stock/MUG-01", answer=lambda r: True).text == "read"
        self.mug.refresh_from_db()
        assert self.mug.stock == 110

    def test_atomic_rolls_back_an_abandoned_call(self) -> None:
        with pytest.raises(NoAnswer):
            MCPClient().call_tool("tctest_restock_atomic", {"sku": "MUG-01"})
        self.mug.refresh_from_db()
        assert self.mug.stock == 0

    def test_server_side_guard_logs_and_audits_under_debug(self) -> None:
        with self.settings(DEBUG=True), self.assertLogs("mcp_django.replay", "WARNING") as logs:
            MCPClient(replay_guard="off").call_tool("tctest_restock_early", {"sku": "MUG-01"}, answer=lambda r: True)
        assert "replay-unsafe write: tool 'tctest_restock_early'" in logs.output[0]
        assert AuditEvent.objects.filter(kind="replay_unsafe", target="tctest_restock_early").count() == 1

    def test_server_side_guard_is_off_in_production_unless_asked(self) -> None:
        with self.assertNoLogs("mcp_django.replay", "WARNING"):
            MCPClient(replay_guard="off").call_tool("tctest_restock_early", {"sku": "MUG-01"}, answer=lambda r: True)
        with mcp_settings(REPLAY_GUARD=True), self.assertLogs("mcp_django.replay", "WARNING"):
            MCPClient(replay_guard="off").call_tool("tctest_restock_early", {"sku": "MUG-01"}, answer=lambda r: True)

    def test_async_atomic_is_refused_at_registration(self) -> None:
        from mcp_django.registry import Registry

        with pytest.raises(TypeError, match="atomic= needs a sync handler"):

            @Registry().tool(atomic=True)
            async def nope() -> str:
                return "x"


@pytest.mark.django_db
def test_pytest_fixture(mcp_client) -> None:
    user = User.objects.create_user("bob")
    assert mcp_client.call_tool("echo", {"text": "hi"}).text == "hi"
    legacy = mcp_client(user=user, revision="2025-11-25")
    assert legacy.call_tool("whoami").structured["username"] == "bob"
    assert legacy._session_id is not None


def test_the_plugin_is_an_entry_point() -> None:
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["pytest11"]["mcp_django.pytest_plugin"]
    assert target == "mcp_django.pytest_plugin"
    import importlib

    assert hasattr(importlib.import_module(target), "mcp_client")


def test_what_an_answer_becomes_for_each_kind_of_ask() -> None:
    """docs/testing.md, "Answering": what ``answer`` may return, per ask, made into the wire result."""
    from mcp_django.inprocess.answers import Answer, InputRequest, answer_for
    from mcp_django.testing import raw

    schema = {"properties": {"name": {"type": "string", "default": "Ada"}, "age": {"type": "integer"}}}
    form = InputRequest("form", "elicitation/create", {"message": "Who?", "requestedSchema": schema})
    link = InputRequest("link", "elicitation/create", {"mode": "url", "url": "https://example.com/pay"})
    said = [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}]
    sample = InputRequest("model", "sampling/createMessage", {"messages": said})
    roots = InputRequest("roots", "roots/list")
    assert (form.type, form.schema, link.type, link.url, link.message) == (
        "elicit",
        schema,
        "elicit_url",
        "https://example.com/pay",
        None,
    )
    assert (sample.type, sample.message, roots.type, roots.message) == ("sample", "Capital of France?", "roots", None)
    # True: accepted with the schema's defaults (a URL elicitation has no content).
    assert answer_for(lambda r: True, form) == Answer({"action": "accept", "content": {"name": "Ada"}})
    assert answer_for(lambda r: True, link) == Answer({"action": "accept"})
    assert answer_for(lambda r: False, link) == Answer({"action": "decline"})
    full = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}
    assert answer_for({"model": full}, sample) == Answer(full)
    assert answer_for({"Capital of France?": "Paris"}, sample).result["content"]["text"] == "Paris"  # type: ignore[index]
    assert answer_for({"roots": ["file:///a", {"uri": "file:///b", "name": "b"}]}, roots) == Answer(
        {"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]}
    )
    # A dict's value may itself be a callable, given the request.
    assert answer_for({"form": lambda r: {"name": r.key}}, form) == Answer(
        {"action": "accept", "content": {"name": "form"}}
    )
    assert answer_for(lambda r: raw({"action": "maybe"}), form) == Answer({"action": "maybe"})
    with pytest.raises(NoAnswer, match="returned None"):
        answer_for(lambda r: None, form)
    for wrong, request in ((["x"], form), ({"name": "x"}, link), (3, sample), ("file:///a", roots)):
        with pytest.raises(TypeError, match="cannot answer"):
            answer_for(lambda r, wrong=wrong: wrong, request)


class DemoTools(TestCase):
    """The demo project's own tools, as a user of the package would test them, in both eras."""

    def setUp(self) -> None:
        self.alice = User.objects.create_user("alice")

    @staticmethod
    def trip_answers(request):  # type: ignore[no-untyped-def]
        return {
            "elicit": {"destination": "Lisbon", "nights": 3, "budget": "low"},
            "roots": ["file:///home/alice/trips"],
            "sample": "trams, tiles, tarts",
            "confirm": True,
        }[request.type]

    def test_plan_trip_in_both_eras(self) -> None:
        modern = MCPClient(user=self.alice).call_tool("plan_trip", {"traveller": "Alice"}, answer=self.trip_answers)
        expected = "Booked Alice to Lisbon (1 root(s) seen). Ideas: trams, tiles, tarts"
        assert modern.text == expected
        # Round 1: the form and the roots together; then the model; then the confirmation.
        assert [sorted(r.input_requests[k].type for k in r.keys) for r in modern.rounds] == [
            ["elicit", "roots"],
            ["sample"],
            ["confirm"],
        ]
        assert modern.runs == 4
        client = MCPClient(user=self.alice, revision="2025-11-25")
        legacy = client.call_tool("plan_trip", {"traveller": "Alice"}, answer=self.trip_answers)
        assert legacy.text == expected and legacy.runs == 1 and len(legacy.rounds) == 4
        client.close()

    def test_clear_cache_in_both_eras(self) -> None:
        for revision in ("2026-07-28", "2025-11-25"):
            with self.subTest(revision=revision):
                client = MCPClient(user=self.alice, revision=revision)
                assert client.call_tool("clear_cache", {"region": "eu"}, answer=lambda r: True).text == (
                    "Cleared the eu cache."
                )
                assert client.call_tool("clear_cache", {"region": "us"}, answer=lambda r: False).text == (
                    "Left the cache alone."
                )
                client.close()


@pytest.mark.parametrize("tool", ["tctest_restock_early", "tctest_arestock_early"])
def test_server_side_guard_on_a_served_endpoint(raw, tool: str, caplog: pytest.LogCaptureFixture) -> None:
    """Production threading (worker pool, database threads), no test client: REPLAY_GUARD on."""
    from mcp_django import audit

    Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.50"), stock=0)
    with mcp_settings(REPLAY_GUARD=True), caplog.at_level("WARNING", logger="mcp_django.replay"):
        first = raw.call(tool, {"sku": "MUG-01"}).json()["result"]
        assert first["resultType"] == "input_required"
    audit.flush()
    assert AuditEvent.objects.filter(kind="replay_unsafe", target=tool).count() == 1
    assert any(f"tool {tool!r}" in message and "UPDATE" in message for message in caplog.messages)
    assert any("testclient_tools.py" in message and f"in {tool}" in message for message in caplog.messages)
    # Off by default in production (DEBUG off): nothing more.
    raw.call(tool, {"sku": "MUG-01"})
    audit.flush()
    assert AuditEvent.objects.filter(kind="replay_unsafe", target=tool).count() == 1
