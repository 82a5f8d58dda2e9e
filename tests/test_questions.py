"""An ask's question digest: what states in flight carry, computed at its first read and kept."""

from __future__ import annotations

import functools

from mcp_django.asks import questions

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_digests_are_those_states_in_flight_carry() -> None:
    """The same digests (and default keys) as the release before gave the same questions."""
    assert questions.elicit("Step 1: What is your name?", NAME, key="step1").digest == "f2c509ca7fd9cfa62f5db656"
    assert questions.confirm("Sure?").default_key() == "confirm-d6433f556d4c"
    url = questions.elicit_url("Sign in", "https://x.example/a")
    assert url.digest == url.params["elicitationId"] == "369da02d02c2962742e0661b"
    # A given elicitation id is part of the question: read after it is in the params.
    named = questions.elicit_url("Sign in", "https://x.example/a", elicitation_id="e1")
    assert named.digest == "d827c91018a9ffd659470fd2"


def test_the_digest_is_computed_at_its_first_read_and_kept() -> None:
    ask = questions.Ask("elicitation/create", {"message": "a"}, "elicitation.form", "elicit")
    assert "digest" not in ask.__dict__  # nothing computed until it is read
    ask.params["message"] = "b"  # a question changed before it is asked is digested as asked
    first = ask.digest
    assert first == questions.Ask("elicitation/create", {"message": "b"}, "elicitation.form", "elicit").digest
    ask.params["message"] = "c"
    assert ask.digest == first  # kept: the question is fixed once asked
    again = ask.again("try again")
    assert again.digest == first and again.retry == "try again"
    assert isinstance(questions.Ask.digest, functools.cached_property)  # read on the class: the descriptor
