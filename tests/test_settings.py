"""``MCP_DJANGO`` read through ``mcp_settings``: coercion, caching, and a test per check id it feeds."""

from __future__ import annotations

import types
import typing
import warnings
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from mcp_django import checks
from mcp_django.conf import SETTINGS, MCPSettings, mcp_settings


def mcp_with(**values: Any) -> dict[str, Any]:
    return {**settings.MCP_DJANGO, **values}


def problems(**values: Any) -> list[Any]:
    with override_settings(MCP_DJANGO=mcp_with(**values)):
        found = checks.check_settings()
    for message in found:
        assert message.hint, message  # every message says how to fix it
    return found


def test_every_default_passes_its_own_coercer() -> None:
    with override_settings(MCP_DJANGO={}):
        assert checks.check_settings() == []
        for name in SETTINGS:
            getattr(mcp_settings, name)
    assert checks.check_settings() == []  # the test settings are clean too


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the type ``hint`` names, one level deep (enough for settings)."""
    if hint is Any:
        return True
    if isinstance(hint, types.UnionType):
        return any(_fits(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint) or hint
    if not isinstance(value, origin):
        return False
    args = typing.get_args(hint)
    if origin is list and args:
        return all(_fits(item, args[0]) for item in value)
    if origin is dict and args:
        return all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    return True


@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "REQUEST_STATE_KEY": "k" * 40,
            "SCOPES_SUPPORTED": ["read"],
            "RESOURCE_URL": "https://a.example/mcp",
            "SERVER_TITLE": "Shop",
            "TASK_TTL_MS": None,
            "REPLAY_GUARD": True,
            "AUDIT_ROUNDS": False,
            "SKILLS_DIRS": ["skills"],
            "ROUND_GATHER_TIMEOUT": 1,
        },
    ],
    ids=["defaults", "given"],
)
def test_every_setting_has_the_type_its_coercer_declares(values: dict[str, Any]) -> None:
    # mypy types mcp_settings.NAME by the return annotation of NAME's coercer (Setting is generic).
    assert list(SETTINGS) == [name for name in vars(MCPSettings) if name.isupper()]
    with override_settings(MCP_DJANGO=values), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # AUDIT_ROUNDS, the older spelling
        for name, setting in SETTINGS.items():
            hint = typing.get_type_hints(setting.coerce).get("return", Any)
            value = getattr(mcp_settings, name)
            assert _fits(value, hint), (name, value, hint)


def test_values_are_coerced_once_and_follow_override_settings() -> None:
    with override_settings(MCP_DJANGO=mcp_with(REQUEST_STATE_LIFETIME=42, ALLOWED_ORIGINS=("HTTPS://App.Example",))):
        assert mcp_settings.REQUEST_STATE_LIFETIME == 42
        first = mcp_settings.ALLOWED_ORIGINS
        assert first == ["https://app.example"]
        assert mcp_settings.ALLOWED_ORIGINS is first  # cached: a plain attribute read per request
    assert mcp_settings.REQUEST_STATE_LIFETIME == settings.MCP_DJANGO.get("REQUEST_STATE_LIFETIME", 600)
    assert mcp_settings.ALLOWED_ORIGINS == []
    with pytest.raises(AttributeError):
        mcp_settings.NO_SUCH_SETTING  # noqa: B018


def test_a_wrong_value_is_refused_at_use_with_the_key_named() -> None:
    with (
        override_settings(MCP_DJANGO=mcp_with(REQUEST_STATE_LIFETIME="ten minutes")),
        pytest.raises(ImproperlyConfigured, match=r"REQUEST_STATE_LIFETIME.*whole number.*ten minutes.*E010"),
    ):
        mcp_settings.REQUEST_STATE_LIFETIME  # noqa: B018


def test_e009_unknown_key_with_a_guess() -> None:
    found = problems(REQUEST_STATE_KEYS="x" * 40, ZZZ=1)
    assert [m.id for m in found] == ["mcp_django.E009", "mcp_django.E009"]
    assert "'REQUEST_STATE_KEYS'" in found[0].msg and "did you mean 'REQUEST_STATE_KEY'?" in found[0].msg
    assert "'ZZZ'" in found[1].msg and "did you mean" not in found[1].msg


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("ALLOWED_ORIGINS", "https://app.example", "must be a list of origins"),
        ("REQUEST_STATE_LIFETIME", "ten minutes", "whole number, 0 or more"),
        ("REQUEST_STATE_LIFETIME", 1.5, "whole number, 0 or more"),
        ("MAX_REQUEST_BYTES", 0, "whole number above 0"),
        ("MAX_INPUT_ROUNDS", True, "whole number, 0 or more"),
        ("AUTH_CACHE_SECONDS", -1, "number of seconds"),
        ("ALLOW_ANONYMOUS", "yes", "True or False"),
        ("REQUEST_STATE_KEY", 12345, "str or bytes secret"),
        ("CACHE_SCOPE", "shared", "one of 'private', 'public'"),
        ("SERVER_NAME", "", "non-empty str"),
        ("AUTHENTICATION_CLASSES", "rest_framework.authentication.TokenAuthentication", "must be a list"),
    ],
)
def test_e010_wrong_type(name: str, value: Any, expected: str) -> None:
    found = problems(**{name: value})
    assert [m.id for m in found] == ["mcp_django.E010"]
    assert f"MCP_DJANGO[{name!r}]" in found[0].msg and expected in found[0].msg


@pytest.mark.parametrize(
    ("name", "value", "check_id", "expected"),
    [
        ("AUTHENTICATION_CLASSES", [42], "mcp_django.E010", "must list dotted paths of classes, not"),
        ("ALLOWED_ORIGINS", [42], "mcp_django.E010", 'must list origins such as "https://app.example", not'),
        ("EXTENSIONS", [42], "mcp_django.E022", "must list dotted paths of modules, not"),
        ("PIPELINE", ["os.path.basename"], "mcp_django.E020", "which does not take (call, call_next)"),
        ("LIMITS", {"RATES": ["100/min"]}, "mcp_django.E050", "must be a dict of scope -> rate, not"),
    ],
)
def test_a_list_or_dict_setting_refuses_entries_of_the_wrong_kind(
    name: str, value: Any, check_id: str, expected: str
) -> None:
    found = problems(**{name: value})
    assert [m.id for m in found] == [check_id] and expected in found[0].msg, found


def test_e010_mcp_django_not_a_dict() -> None:
    with override_settings(MCP_DJANGO=["ALLOW_ANONYMOUS"]):
        assert [m.id for m in checks.check_settings()] == ["mcp_django.E010"]


@pytest.mark.parametrize("origin", ["app.example", "https://app.example/", "//app.example", "https://app.example/x"])
def test_e011_origin_without_scheme_or_with_a_path(origin: str) -> None:
    found = problems(ALLOWED_ORIGINS=["https://ok.example", origin])
    assert [m.id for m in found] == ["mcp_django.E011"]
    assert repr(origin) in found[0].msg and "scheme://host" in found[0].msg
    assert problems(ALLOWED_ORIGINS=["*", "http://localhost:5173"]) == []


def test_e007_authentication_classes() -> None:
    found = problems(AUTHENTICATION_CLASSES=["no.such.Authentication"])
    assert [m.id for m in found] == ["mcp_django.E007"] and "no.such" in found[0].msg


def test_e008_audit_setting() -> None:
    found = problems(AUDIT={"ROUND": False})
    assert [m.id for m in found] == ["mcp_django.E008"]
    assert "ROUND" in found[0].msg and "did you mean 'ROUNDS'?" in found[0].msg
    assert [m.id for m in problems(AUDIT=False)] == ["mcp_django.E008"]
    assert [m.id for m in problems(AUDIT={"BATCH_SIZE": "many"})] == ["mcp_django.E008"]
    assert [m.id for m in problems(AUDIT={"ENABLED": "no"})] == ["mcp_django.E008"]
    assert problems(AUDIT={"ROUNDS": False, "BATCH_SIZE": 10}) == []


def test_older_audit_rounds_spelling_still_counts_with_a_deprecation_warning() -> None:
    with override_settings(MCP_DJANGO=mcp_with(AUDIT_ROUNDS=False)):
        assert checks.check_settings() == []
        with pytest.warns(DeprecationWarning, match=r'AUDIT_ROUNDS.*removed in 0\.3\.0.*\["AUDIT"\]\["ROUNDS"\]'):
            assert mcp_settings.AUDIT["ROUNDS"] is False
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert mcp_settings.AUDIT["ROUNDS"] is False  # warned once, when the value was read
    with override_settings(MCP_DJANGO=mcp_with(AUDIT={"ROUNDS": False})), warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling: no warning
        assert mcp_settings.AUDIT["ROUNDS"] is False


def test_other_checks_leave_a_wrong_value_to_check_settings() -> None:
    # W001/W002/W003 read settings too; a bad value is one E010, not a crash of `check`.
    with override_settings(MCP_DJANGO=mcp_with(REQUEST_STATE_KEY=1, ALLOW_ANONYMOUS="yes")):
        assert checks.check_request_state_key() == [] and checks.check_anonymous() == []


@pytest.mark.django_db
def test_manage_py_check_names_the_misspelt_key() -> None:
    with (
        override_settings(MCP_DJANGO=mcp_with(REQUEST_STATE_KEYS="x")),
        pytest.raises(
            SystemCheckError, match=r"mcp_django\.E009.*REQUEST_STATE_KEYS.*did you mean 'REQUEST_STATE_KEY'"
        ),
    ):
        call_command("check")
