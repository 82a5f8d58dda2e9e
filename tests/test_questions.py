"""An ask's question digest: what states in flight carry, computed at its first read and kept."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from rest_framework import serializers

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


class _Contact(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField(max_length=5)
    age = serializers.IntegerField(min_value=0)


def test_a_serializer_form_answers_validated_data_or_asks_again() -> None:
    for schema in (_Contact, _Contact()):
        ask = questions.elicit("Who?", schema, key="who")
        assert ask.params["requestedSchema"]["type"] == "object"
        assert set(ask.params["requestedSchema"]["properties"]) == {"name", "age"}
        answer = ask.parse("who", {"action": "accept", "content": {"name": "Ada", "age": "36"}})
        assert answer.data == {"name": "Ada", "age": 36}  # validated_data: the age converted
        with pytest.raises(questions.ContentInvalid) as info:
            ask.parse("who", {"action": "accept", "content": {"name": "Adelaide", "age": -1}})
        assert info.value.problem.startswith("name: ") and "; age: " in info.value.problem


class _Tags(serializers.Serializer):  # type: ignore[type-arg]
    tags = serializers.ListField(child=serializers.ChoiceField(choices=["a", "b"]))

    def validate(self, data: Any) -> Any:
        if data["tags"] == ["b"]:
            raise serializers.ValidationError("b alone is not enough")
        return data


def test_a_multi_select_forms_errors_are_text_a_person_reads() -> None:
    # A list's errors come keyed by item: once shown as the dict's repr (ErrorDetail(string=...)).
    ask = questions.elicit("Which?", _Tags, key="tags")
    with pytest.raises(questions.ContentInvalid) as info:
        ask.parse("tags", {"action": "accept", "content": {"tags": ["a", "z"]}})
    assert info.value.problem == 'tags.1: "z" is not a valid choice.'
    with pytest.raises(questions.ContentInvalid) as info:
        ask.parse("tags", {"action": "accept", "content": {"tags": ["b"]}})
    assert info.value.problem == "b alone is not enough"  # the form's own error, without non_field_errors


def test_an_elicitation_schema_must_describe_an_object() -> None:
    with pytest.raises(TypeError, match="must describe an object"):
        questions.elicit("How many?", {"type": "integer"})


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"content": {"type": "text", "text": "hi"}, "model": "m"}, "a sampling result needs role and model"),
        ({"role": "assistant", "content": {"type": "text", "text": "hi"}}, "a sampling result needs role and model"),
        ({"role": "assistant", "model": "m", "content": []}, "a sampling result needs content blocks"),
        ({"role": "assistant", "model": "m", "content": {"text": "no type"}}, "a sampling result needs content blocks"),
    ],
)
def test_a_malformed_sampling_result_is_refused(raw: dict[str, Any], problem: str) -> None:
    with pytest.raises(questions.AnswerInvalid) as info:
        questions.sample("Hi?").parse("s", raw)
    assert info.value.problem == problem and not isinstance(info.value, questions.ContentInvalid)


@pytest.mark.parametrize("roots", [None, "file:///a", [{"name": "no uri"}], ["file:///a"]])
def test_a_malformed_roots_result_is_refused(roots: Any) -> None:
    with pytest.raises(questions.AnswerInvalid) as info:
        questions.list_roots().parse("r", {"roots": roots})
    assert info.value.problem == "roots must be a list of objects with a uri"
