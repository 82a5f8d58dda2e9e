"""The replay rule over the real endpoint: rounds, answers, refusals, capabilities."""

from __future__ import annotations

import sys
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

import tests.modern_tools as tools
from tests.conftest import Raw, mcp_settings, meta

# In process (mcp_django.testing.HttpxTransport): the same application and wire format,
# no socket, and a plain test database rolled back after each test.
pytestmark = pytest.mark.django_db


@pytest.fixture
def raw(raw_inprocess: Raw) -> Raw:
    return raw_inprocess


ACCEPT = {"action": "accept", "content": {"confirm": True}}
ALICE = {"action": "accept", "content": {"name": "Alice"}}
MODEL = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m", "stopReason": "endTurn"}


def result(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert "error" not in body, body
    return body["result"]


def error(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert "result" not in body, body
    return body["error"]


def first_round(raw: Raw, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    out = result(raw.call(name, arguments, **kw))
    assert out["resultType"] == "input_required"
    return out


def test_round_trip(raw: Raw) -> None:
    first = first_round(raw, "test_input_required_result_elicitation")
    assert "ttlMs" not in first and "cacheScope" not in first
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    done = result(
        raw.call(
            "test_input_required_result_elicitation",
            inputResponses={"user_name": ALICE},
            requestState=first["requestState"],
        )
    )
    assert done["resultType"] == "complete" and done["content"][0]["text"] == "Hello, Alice!"


def test_parallel_asks_share_a_round_and_answers_ride_in_state(raw: Raw) -> None:
    tools.runs.clear()
    first = first_round(raw, "modtest_gather")
    assert set(first["inputRequests"]) == {"name", "model"}
    # Answer only one: the other is asked again, the first is kept in the new state.
    second = first_round(raw, "modtest_gather", inputResponses={"name": ALICE}, requestState=first["requestState"])
    assert set(second["inputRequests"]) == {"model"}
    done = result(raw.call("modtest_gather", inputResponses={"model": MODEL}, requestState=second["requestState"]))
    assert done["content"][0]["text"] == "Alice/Paris"
    assert tools.runs["gather"] == 3  # the handler ran again from the start each time


def test_taskgroup_asks_share_a_round(raw: Raw) -> None:
    first = first_round(raw, "modtest_taskgroup")
    assert set(first["inputRequests"]) == {"first", "second"}


@pytest.mark.parametrize("tool", ["modtest_swallow", "modtest_sync_swallow"])
def test_except_exception_does_not_swallow_the_end_of_an_attempt(raw: Raw, tool: str) -> None:
    first = first_round(raw, tool)
    assert set(first["inputRequests"]) == {"go"}
    done = result(raw.call(tool, inputResponses={"go": ACCEPT}, requestState=first["requestState"]))
    assert done["content"][0]["text"] == "go=True"


def test_sync_handler_multi_ask_and_state(raw: Raw) -> None:
    tools.runs.clear()
    args = {"item": "tea"}
    first = first_round(raw, "modtest_sync_multi", args)
    assert sorted(r["method"] for r in first["inputRequests"].values()) == [
        "elicitation/create",
        "sampling/createMessage",
    ]
    keys = {r["method"]: k for k, r in first["inputRequests"].items()}
    second = first_round(
        raw,
        "modtest_sync_multi",
        args,
        inputResponses={keys["elicitation/create"]: ACCEPT, keys["sampling/createMessage"]: MODEL},
        requestState=first["requestState"],
    )
    (key,) = second["inputRequests"]
    done = result(
        raw.call("modtest_sync_multi", args, inputResponses={key: ALICE}, requestState=second["requestState"])
    )
    assert done["content"][0]["text"] == "tea for Alice: Paris (attempt 3)"
    assert tools.runs["sync_multi"] == 3


def test_default_keys_are_deterministic_and_distinct(raw: Raw) -> None:
    first = first_round(raw, "modtest_twice")
    (key1,) = first["inputRequests"]
    again = first_round(raw, "modtest_twice")
    assert list(again["inputRequests"]) == [key1]
    second = first_round(raw, "modtest_twice", inputResponses={key1: ACCEPT}, requestState=first["requestState"])
    (key2,) = second["inputRequests"]
    assert key2 != key1 and key2.startswith(key1)
    decline = {"action": "decline"}
    done = result(raw.call("modtest_twice", inputResponses={key2: decline}, requestState=second["requestState"]))
    assert done["content"][0]["text"] == "True,False"


def test_missing_answer_is_asked_again_and_unknown_keys_are_ignored(raw: Raw) -> None:
    first = first_round(raw, "test_input_required_result_elicitation")
    state = first["requestState"]
    wrong = first_round(
        raw, "test_input_required_result_elicitation", inputResponses={"wrong_key": ALICE}, requestState=state
    )
    assert list(wrong["inputRequests"]) == ["user_name"]
    extra = {"user_name": ALICE, "other": {"action": "accept", "content": {"x": 1}}}
    done = result(
        raw.call("test_input_required_result_elicitation", inputResponses=extra, requestState=wrong["requestState"])
    )
    assert done["content"][0]["text"] == "Hello, Alice!"


def test_input_responses_without_request_state_answer_only_the_first_questions(raw: Raw) -> None:
    """Answers count only for questions this server asked. Without a requestState, that is
    the first round's (the conformance suite's ignore-extra-params check sends those up
    front): three sequential asks answered up front must not complete in zero rounds."""
    tools.runs.clear()
    answers = {f"r{i}": ACCEPT for i in range(3)}
    first = first_round(raw, "modtest_rounds", {"n": 3}, inputResponses=answers)
    assert list(first["inputRequests"]) == ["r1"]  # r0 was the first question; r1 is asked now
    # The same answers again, with that state: only r1, the question it sealed, is taken.
    second = first_round(raw, "modtest_rounds", {"n": 3}, inputResponses=answers, requestState=first["requestState"])
    assert list(second["inputRequests"]) == ["r2"]
    done = result(raw.call("modtest_rounds", {"n": 3}, inputResponses=answers, requestState=second["requestState"]))
    assert done["content"][0]["text"] == "3 rounds"
    # Parallel first questions may all be answered up front; extra keys are ignored.
    extra = {"user_name": ALICE, "other": {"action": "accept", "content": {"x": 1}}}
    hello = result(raw.call("test_input_required_result_elicitation", inputResponses=extra))
    assert hello["content"][0]["text"] == "Hello, Alice!"
    both = {"name": ALICE, "model": MODEL}
    assert result(raw.call("modtest_gather", inputResponses=both))["content"][0]["text"] == "Alice/Paris"


def test_stale_answer_to_a_changed_question_is_not_reused(raw: Raw) -> None:
    first = first_round(raw, "modtest_stale")
    tools.WORDING["text"] = "Proceed with the new plan?"
    try:
        again = first_round(
            raw, "modtest_stale", inputResponses={"proceed": ACCEPT}, requestState=first["requestState"]
        )
        assert again["inputRequests"]["proceed"]["params"]["message"] == "Proceed with the new plan?"
    finally:
        tools.WORDING["text"] = "Proceed?"


@pytest.mark.parametrize(
    "responses",
    [
        {"user_name": 12345},
        {"user_name": {"action": "maybe"}},
        {"user_name": {"action": "accept"}},
    ],
)
def test_malformed_answers_are_errors(raw: Raw, responses: dict[str, Any]) -> None:
    first = first_round(raw, "test_input_required_result_elicitation")
    r = raw.call("test_input_required_result_elicitation", inputResponses=responses, requestState=first["requestState"])
    assert r.status_code == 400 and error(r)["code"] == -32602


def test_content_that_does_not_fit_the_form_is_asked_again(raw: Raw) -> None:
    """A well-formed answer whose content fails the requested schema (a person's mistake) is no
    protocol error: the same key is asked again in a new round, its message saying what was wrong."""
    first = first_round(raw, "test_input_required_result_elicitation")
    asked = first["inputRequests"]["user_name"]
    wrong = {"user_name": {"action": "accept", "content": {"name": 3}}}
    again = first_round(
        raw, "test_input_required_result_elicitation", inputResponses=wrong, requestState=first["requestState"]
    )
    reasked = again["inputRequests"]["user_name"]
    assert list(again["inputRequests"]) == ["user_name"]
    assert reasked["params"]["requestedSchema"] == asked["params"]["requestedSchema"]
    message = reasked["params"]["message"]
    assert message.startswith(asked["params"]["message"] + "\n\n(The previous answer was not accepted: ")
    assert "name: 3 is not of type" in message and "string" in message
    # The corrected answer, to the re-asked key with the new state, completes the call.
    done = result(
        raw.call(
            "test_input_required_result_elicitation",
            inputResponses={"user_name": ALICE},
            requestState=again["requestState"],
        )
    )
    assert done["content"][0]["text"] == "Hello, Alice!"


def test_input_responses_must_be_an_object(raw: Raw) -> None:
    r = raw.call("test_input_required_result_elicitation", inputResponses=None)
    assert error(r)["code"] == -32602


def test_dataclass_schema_and_validation(raw: Raw) -> None:
    first = first_round(raw, "modtest_dataclass_elicit")
    schema = first["inputRequests"]["address"]["params"]["requestedSchema"]
    assert schema["properties"] == {"street": {"type": "string"}, "zip_code": {"type": "integer"}}
    assert schema["required"] == ["street", "zip_code"]
    bad = {"address": {"action": "accept", "content": {"street": "Main", "zip_code": "x"}}}
    again = first_round(raw, "modtest_dataclass_elicit", inputResponses=bad, requestState=first["requestState"])
    assert "zip_code: Expected `int`, got `str`" in again["inputRequests"]["address"]["params"]["message"]
    good = {"address": {"action": "accept", "content": {"street": "Main", "zip_code": 12}}}
    done = result(raw.call("modtest_dataclass_elicit", inputResponses=good, requestState=first["requestState"]))
    assert done["structuredContent"] == {"action": "accept", "data": {"street": "Main", "zip_code": 12}}


def test_prompt_and_resource_rounds(raw: Raw) -> None:
    p1 = result(raw.post("prompts/get", {"name": "modtest_prompt", "arguments": {"topic": "tea"}}))
    assert p1["resultType"] == "input_required"
    p2 = result(
        raw.post(
            "prompts/get",
            {
                "name": "modtest_prompt",
                "arguments": {"topic": "tea"},
                "inputResponses": {"tone": {"action": "accept", "content": {"tone": "dry"}}},
                "requestState": p1["requestState"],
            },
        )
    )
    assert p2["messages"][0]["content"]["text"] == "Write about tea in a dry tone."
    r1 = result(raw.post("resources/read", {"uri": "modtest://secret/x"}))
    assert r1["resultType"] == "input_required" and "ttlMs" not in r1
    r2 = result(
        raw.post(
            "resources/read",
            {"uri": "modtest://secret/x", "inputResponses": {"read": ACCEPT}, "requestState": r1["requestState"]},
        )
    )
    assert r2["contents"][0]["text"] == "secret x"


# -- capabilities -----------------------------------------------------------------------


def test_missing_capability(raw: Raw) -> None:
    r = raw.call("test_missing_capability", caps={})
    assert r.status_code == 400
    e = error(r)
    assert e["code"] == -32021 and e["data"] == {"requiredCapabilities": {"sampling": {}}}
    url = raw.call("modtest_url", caps={"elicitation": {}})
    assert error(url)["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    allowed = first_round(raw, "modtest_url", caps={"elicitation": {"url": {}}})
    params = allowed["inputRequests"]["consent"]["params"]
    assert params["mode"] == "url" and params["url"] == "https://example.com/consent" and params["elicitationId"]


def test_capabilities_are_per_request(raw: Raw) -> None:
    only_sampling = first_round(raw, "test_input_required_result_capabilities", caps={"sampling": {}})
    assert [r["method"] for r in only_sampling["inputRequests"].values()] == ["sampling/createMessage"]
    assert result(raw.call("modtest_optional", caps={}))["content"][0]["text"] == "no elicitation: used the default"


# -- refusals -----------------------------------------------------------------------------


def assert_refused(r: httpx.Response) -> None:
    assert r.status_code == 400
    assert error(r) == {"code": -32602, "message": "the requestState is not valid"}


def test_refused_states(raw: Raw) -> None:
    state = first_round(raw, "modtest_question", {"wording": "A?"})["requestState"]
    answer = {"q": ACCEPT}
    # Tampered.
    assert_refused(
        raw.call("modtest_question", {"wording": "A?"}, inputResponses=answer, requestState=state + "-TAMPERED")
    )
    # Replayed on other arguments.
    assert_refused(raw.call("modtest_question", {"wording": "B?"}, inputResponses=answer, requestState=state))
    # Replayed on another tool with the same arguments.
    assert_refused(raw.call("modtest_stale", {}, inputResponses=answer, requestState=state))
    # Replayed on another method.
    r = raw.post("prompts/get", {"name": "modtest_question", "arguments": {"wording": "A?"}, "requestState": state})
    assert error(r)["code"] == -32602
    # Still good on its own request.
    ok = raw.call("modtest_question", {"wording": "A?"}, inputResponses=answer, requestState=state)
    assert result(ok)["content"][0]["text"] == "yes"


def test_expired_oversized_and_foreign_key(raw: Raw) -> None:
    with mcp_settings(**{"REQUEST_STATE_KEY": "k" * 40, "ALLOW_ANONYMOUS": True, "REQUEST_STATE_LIFETIME": 0}):
        expired = first_round(raw, "modtest_swallow")["requestState"]
        assert_refused(raw.call("modtest_swallow", inputResponses={"go": ACCEPT}, requestState=expired))
    with mcp_settings(**{"REQUEST_STATE_KEY": "k" * 40, "ALLOW_ANONYMOUS": True}):
        foreign = first_round(raw, "modtest_swallow")["requestState"]
    assert_refused(raw.call("modtest_swallow", inputResponses={"go": ACCEPT}, requestState=foreign))
    state = first_round(raw, "modtest_swallow")["requestState"]
    with mcp_settings(
        **{
            "REQUEST_STATE_KEY": "test-request-state-key-0123456789-abcdefghijklmnop",
            "ALLOW_ANONYMOUS": True,
            "MAX_REQUEST_STATE_BYTES": 64,
        }
    ):
        assert_refused(raw.call("modtest_swallow", inputResponses={"go": ACCEPT}, requestState=state))


def test_round_cap(raw: Raw) -> None:
    settings = {
        "REQUEST_STATE_KEY": "test-request-state-key-0123456789-abcdefghijklmnop",
        "ALLOW_ANONYMOUS": True,
        "MAX_INPUT_ROUNDS": 2,
    }
    with mcp_settings(**settings):
        state = None
        for i in range(2):
            kw: dict[str, Any] = {"inputResponses": {f"r{i - 1}": ACCEPT}, "requestState": state} if state else {}
            state = first_round(raw, "modtest_rounds", {"n": 5}, **kw)["requestState"]
        r = raw.call("modtest_rounds", {"n": 5}, inputResponses={"r1": ACCEPT}, requestState=state)
    assert r.status_code == 400
    assert error(r) == {"code": -32602, "message": "this request needed more than 2 rounds of input"}


def test_encrypted_state_flow(raw: Raw) -> None:
    settings = {"REQUEST_STATE_KEY": "e" * 40, "ALLOW_ANONYMOUS": True, "ENCRYPT_REQUEST_STATE": True}
    with mcp_settings(**settings):
        first = first_round(raw, "test_input_required_result_request_state")
        assert len(first["requestState"].split(".")) == 3 and "request-state-nonce" not in first["requestState"]
        done = result(
            raw.call(
                "test_input_required_result_request_state",
                inputResponses={"confirm": {"action": "accept", "content": {"ok": True}}},
                requestState=first["requestState"],
            )
        )
    assert done["content"][0]["text"] == "state-ok: confirmation received"


# -- principals -----------------------------------------------------------------------------


def token_for(username: str) -> str:
    user = get_user_model().objects.create_user(username, password="pw")
    return Token.objects.create(user=user).key


def test_state_is_bound_to_the_django_user(raw: Raw) -> None:
    alice, bob = token_for("alice"), token_for("bob")
    first = result(raw.call("modtest_swallow", headers={"authorization": f"Token {alice}"}))
    state = first["requestState"]
    assert_refused(
        raw.call(
            "modtest_swallow",
            inputResponses={"go": ACCEPT},
            requestState=state,
            headers={"authorization": f"Token {bob}"},
        )
    )
    assert_refused(raw.call("modtest_swallow", inputResponses={"go": ACCEPT}, requestState=state))  # anonymous
    ok = raw.call(
        "modtest_swallow",
        inputResponses={"go": ACCEPT},
        requestState=state,
        headers={"authorization": f"Token {alice}"},
    )
    assert result(ok)["content"][0]["text"] == "go=True"


def test_authentication(raw: Raw) -> None:
    alice = token_for("alice")
    who = result(raw.call("whoami", headers={"authorization": f"Token {alice}"}))
    assert who["structuredContent"]["username"] == "alice"
    bad = raw.call("whoami", headers={"authorization": "Token nope"})
    assert bad.status_code == 401 and "www-authenticate" in bad.headers
    with mcp_settings(**{"REQUEST_STATE_KEY": "x" * 40, "ALLOW_ANONYMOUS": False}):
        refused = raw.call("whoami")
        assert refused.status_code == 401
        assert (
            result(raw.call("whoami", headers={"authorization": f"Token {alice}"}))["structuredContent"]["username"]
            == "alice"
        )


def test_session_cookie_authentication(raw: Raw) -> None:
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    user = get_user_model().objects.create_user("carol", password="pw")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    cookie = {"cookie": f"{settings.SESSION_COOKIE_NAME}={session.session_key}"}
    who = result(raw.call("whoami", headers=cookie))
    assert who["structuredContent"] == {"principal": f"auth.user:{user.pk}", "username": "carol"}


def test_list_methods_never_ask(raw: Raw) -> None:
    for method in ("tools/list", "prompts/list", "resources/list"):
        assert result(raw.post(method, caps={}))["resultType"] == "complete"


def test_meta_progress_token_with_rounds(raw: Raw) -> None:
    params = {"name": "test_input_required_result_elicitation", "arguments": {}, "_meta": meta(progressToken=1)}
    assert result(raw.post("tools/call", params))["resultType"] == "input_required"


def test_an_ended_attempt_unwinds(raw: Raw) -> None:
    """The attempt ends at its unanswered ask: its cleanup still runs."""
    import time

    tools.runs["cleanup"] = 0
    first_round(raw, "modtest_cleanup")
    deadline = time.monotonic() + 5
    while tools.runs["cleanup"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tools.runs["cleanup"] == 1


def test_an_ask_made_while_an_ended_attempt_unwinds_is_refused_and_not_sent(raw: Raw) -> None:
    """The attempt ends at the first step's unanswered ask; an ask in its unwinding joins no round."""
    tools.runs["late ask refused"] = 0
    first = first_round(raw, "modtest_asks_while_unwinding")
    assert list(first["inputRequests"]) == ["first"]
    assert tools.runs["late ask refused"] == 1
    done = result(
        raw.call("modtest_asks_while_unwinding", inputResponses={"first": ACCEPT}, requestState=first["requestState"])
    )
    assert done["content"][0]["text"] == "done"


def test_an_ended_attempts_awaited_cleanup_runs_after_the_answer(raw: Raw) -> None:
    import time

    tools.runs["async cleanup"] = 0
    first = first_round(raw, "modtest_async_cleanup")
    assert list(first["inputRequests"]) == ["keep"]
    deadline = time.monotonic() + 5
    while tools.runs["async cleanup"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tools.runs["async cleanup"] == 1


@pytest.mark.parametrize(
    "factory",
    [
        "asyncio",
        pytest.param("eager", marks=pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks: Python 3.12+")),
    ],
)
def test_gathered_asks_share_a_round_whatever_the_hosts_task_factory(raw: Raw, factory: str) -> None:
    """A host's eager task factory runs a branch's first step before the attempt adopts it:
    that branch's ask must park like any branch's, not end the attempt as the handler's own would."""
    import asyncio

    from mcp_django.inprocess import serving

    loop = serving.event_loop()

    async def set_factory(value: Any) -> Any:
        previous = loop.get_task_factory()
        loop.set_task_factory(value)
        return previous

    previous = asyncio.run_coroutine_threadsafe(
        set_factory(asyncio.eager_task_factory if factory == "eager" else None), loop
    ).result(10)
    try:
        first = first_round(raw, "modtest_gather_two")
        assert sorted(first["inputRequests"]) == ["one", "two"]
        answers = {"one": ACCEPT, "two": ACCEPT}
        done = result(raw.call("modtest_gather_two", inputResponses=answers, requestState=first["requestState"]))
        assert done["content"][0]["text"] == "True-True"
    finally:
        asyncio.run_coroutine_threadsafe(set_factory(previous), loop).result(10)


def test_an_ended_attempt_leaves_no_cycle(raw: Raw) -> None:
    """The cancelled attempt is freed as soon as it has unwound, with the collector off.

    Its CancelledError, kept by its task, had a traceback holding the handler's frames,
    which held that task: a cycle of the whole attempt (ctx, call, request) for the cyclic
    collector, whose passes then came every few dozen rounds under load.
    """
    import gc
    import time

    tools.markers.clear()
    gc.collect()
    gc.disable()
    try:
        first_round(raw, "modtest_marked")
        first_round(raw, "modtest_marked")  # the first attempt has unwound by the time this one ends
        deadline = time.monotonic() + 5
        while tools.markers[0]() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tools.markers[0]() is None, gc.get_referrers(tools.markers[0]())
    finally:
        gc.enable()


def test_a_sync_handlers_error_leaves_no_cycle() -> None:
    """What a sync handler raises (InputRequired at an unanswered ask, or its own error)
    comes back through a future that kept it; its traceback held the frame awaiting that
    future. Under the worker pool (no host thread) it is freed once handled, collector off."""
    import asyncio
    import gc
    import time
    import weakref

    from mcp_django.asks import invoke
    from mcp_django.asks.replay import InputRequired

    def ask(marker: tools.Marker) -> None:
        raise InputRequired

    async def attempt() -> weakref.ref[tools.Marker]:
        marker = tools.Marker()
        ref = weakref.ref(marker)
        try:
            await invoke.run_in_thread(ask, marker)
        except InputRequired:
            pass
        del marker
        return ref

    gc.collect()
    gc.disable()
    try:
        ref = asyncio.run(attempt())
        deadline = time.monotonic() + 5  # the worker lets go of the job just after handing it back
        while ref() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ref() is None, gc.get_referrers(ref())
    finally:
        gc.enable()
