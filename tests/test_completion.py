"""completion/complete: the handler's permissions, ``ctx``, sync completers off the loop, errors answered."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token

from mcp_django import Context, SyncContext, mcp
from tests.conftest import meta

pytestmark = pytest.mark.django_db(transaction=True)

LEGACY = "2025-11-25"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _colours(value: str) -> list[str]:
    return [c for c in ("red", "green", "blue") if c.startswith(value)]


@mcp.prompt(permissions=["shop.view_product"], completions={"colour": _colours})
def completiontest_guarded(colour: str) -> str:
    """A prompt only users with shop.view_product may get."""
    return colour


@mcp.prompt(allow_anonymous=False, completions={"colour": _colours})
def completiontest_members(colour: str) -> str:
    return colour


def _usernames(value: str, ctx: SyncContext) -> list[str]:
    # The ORM from a sync completer, and the caller through ctx.
    names = get_user_model().objects.filter(username__startswith=value).order_by("username")
    return [f"{n}{'*' if n == ctx.user.get_username() else ''}" for n in names.values_list("username", flat=True)]


async def _async_usernames(value: str, ctx: Context) -> list[str]:
    return [f"{value}:{ctx.principal}"]


def _broken(value: str) -> list[str]:
    raise RuntimeError("completer bug")


@mcp.resource(
    "completiontest://users/{name}/{other}",
    permissions=["shop.view_product"],
    completions={"name": _usernames, "other": _async_usernames},
)
def completiontest_user(name: str, other: str) -> str:
    return name


@mcp.resource("completiontest://broken/{x}", completions={"x": _broken, "none": lambda value: None})
def completiontest_broken(x: str) -> str:
    return x


def _modern(url: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": "completion/complete", "params": {**params, "_meta": meta()}}
    extra = {"mcp-protocol-version": "2026-07-28", "mcp-method": "completion/complete", **headers}
    return httpx.post(url, json=body, headers={**HEADERS, **extra}, timeout=10)


def _legacy(url: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    opened = httpx.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers={**HEADERS, **headers}
    )
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
    body = {"jsonrpc": "2.0", "id": 7, "method": "completion/complete", "params": params}
    # A bound on the wait: the old code never answered a failing completer's SSE call.
    return httpx.post(url, json=body, headers={**HEADERS, **headers, **session}, timeout=10)


def answer(r: httpx.Response) -> dict[str, Any]:
    if r.headers["content-type"].startswith("text/event-stream"):
        from tests.conftest import sse_messages

        return next(m for m in sse_messages(r) if m.get("id") == 7)
    return r.json()


def _user(name: str, *perms: str) -> dict[str, str]:
    user = get_user_model().objects.create_user(name)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return {"authorization": f"Token {Token.objects.create(user=user).key}"}


def prompt_ref(name: str, value: str = "r") -> dict[str, Any]:
    return {"ref": {"type": "ref/prompt", "name": name}, "argument": {"name": "colour", "value": value}}


def resource_ref(uri: str, argument: str, value: str) -> dict[str, Any]:
    return {"ref": {"type": "ref/resource", "uri": uri}, "argument": {"name": argument, "value": value}}


@pytest.mark.parametrize("send", [_modern, _legacy], ids=["modern", "legacy"])
def test_completions_need_what_getting_the_prompt_or_resource_needs(live_url: str, send: Any) -> None:
    stranger = _user("stranger")
    viewer = _user("viewer", "view_product")
    for ref in (
        prompt_ref("completiontest_guarded"),
        resource_ref("completiontest://users/{name}/{other}", "name", ""),
    ):
        refused = answer(send(live_url, ref, **stranger))
        unknown_code = -32602 if send is _modern or ref["ref"]["type"] == "ref/prompt" else -32002
        assert refused["error"]["code"] == unknown_code, refused
        assert "result" not in refused
    assert answer(send(live_url, prompt_ref("completiontest_guarded"), **viewer))["result"]["completion"]["values"] == [
        "red"
    ]
    # allow_anonymous=False: an anonymous caller gets no completions either.
    assert answer(send(live_url, prompt_ref("completiontest_members")))["error"]["code"] == -32602
    assert answer(send(live_url, prompt_ref("completiontest_members"), **stranger))["result"]["completion"][
        "values"
    ] == ["red"]
    # A prompt that does not exist is answered as the hidden one is.
    assert answer(send(live_url, prompt_ref("completiontest_nothing"), **viewer))["error"]["code"] == -32602


@pytest.mark.parametrize("send", [_modern, _legacy], ids=["modern", "legacy"])
def test_completers_take_ctx_and_sync_ones_may_use_the_orm(live_url: str, send: Any) -> None:
    viewer = _user("vic", "view_product")
    get_user_model().objects.create_user("vera")
    uri = "completiontest://users/{name}/{other}"
    values = answer(send(live_url, resource_ref(uri, "name", "v"), **viewer))["result"]["completion"]["values"]
    assert values == ["vera", "vic*"]
    # Also through a concrete URI the template matches.
    concrete = answer(send(live_url, resource_ref("completiontest://users/a/b", "other", "x"), **viewer))
    assert concrete["result"]["completion"]["values"] == [
        f"x:auth.user:{get_user_model().objects.get(username='vic').pk}"
    ]


@pytest.mark.parametrize("send", [_modern, _legacy], ids=["modern", "legacy"])
@pytest.mark.parametrize("argument", ["x", "none"])
def test_a_failing_completer_is_a_jsonrpc_error(live_url: str, send: Any, argument: str) -> None:
    r = send(live_url, resource_ref("completiontest://broken/{x}", argument, "a"))
    assert r.status_code == 200
    error = answer(r)["error"]
    assert error["code"] == -32603 and "completiontest_broken" in error["message"]


# -- completers from models, and the demo's, through the official SDK client ------------------


def _shop() -> tuple[str, str]:
    """Two users' tokens: a viewer of the catalogue with orders of their own, and another with other orders."""
    from decimal import Decimal

    from project.shop.models import Order, Product

    mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.00"), stock=3)
    mat = Product.objects.create(name="Mat", sku="MAT-02", price=Decimal("9.00"), stock=1)
    tea = Product.objects.create(name="Tea", sku="TEA-01", price=Decimal("2.00"), stock=9)
    viewer = get_user_model().objects.create_user("shopper")
    viewer.user_permissions.add(Permission.objects.get(codename="view_product"))
    other = get_user_model().objects.create_user("other")
    Order.objects.create(owner=viewer, product=mug, quantity=1)
    Order.objects.create(owner=viewer, product=mug, quantity=2)
    Order.objects.create(owner=other, product=mat, quantity=1)
    Order.objects.create(owner=other, product=tea, quantity=1)
    return Token.objects.create(user=viewer).key, Token.objects.create(user=other).key


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_the_sdk_client_completes_the_demo_prompt_and_template(live_url: str, mode: str) -> None:
    import mcp.types as types
    from asgiref.sync import sync_to_async

    from tests.conftest import sdk_client

    viewer, other = await sync_to_async(_shop)()
    sku = types.ResourceTemplateReference(type="ref/resource", uri="shop://products/{sku}")
    prompt = types.PromptReference(type="ref/prompt", name="order_help")
    async with sdk_client(live_url, token=viewer, mode=mode) as client:
        # A queryset's field, matched by prefix whatever the case.
        skus = (await client.complete(sku, {"name": "sku", "value": "m"})).completion
        assert skus.values == ["MAT-02", "MUG-01"] and skus.total == 2 and not skus.has_more
        assert (await client.complete(sku, {"name": "sku", "value": ""})).completion.values == [
            "MAT-02",
            "MUG-01",
            "TEA-01",
        ]
        # A model field's choices (Order.status), in their declared order.
        status = (await client.complete(prompt, {"name": "status", "value": "p"})).completion
        assert status.values == ["pending", "paid"]
        # A queryset of the caller's own: only the products this user ordered, once each.
        mine = (await client.complete(prompt, {"name": "product", "value": ""})).completion
        assert mine.values == ["Mug"]
        # An argument without a completer gets no values.
        assert (await client.complete(prompt, {"name": "question", "value": "wh"})).completion.values == []
        # The template's concrete URI names it too.
        concrete = types.ResourceTemplateReference(type="ref/resource", uri="shop://products/MUG-01")
        assert (await client.complete(concrete, {"name": "sku", "value": "t"})).completion.values == ["TEA-01"]
    async with sdk_client(live_url, token=other, mode=mode) as client:
        theirs = (await client.complete(prompt, {"name": "product", "value": ""})).completion
        assert theirs.values == ["Mat", "Tea"]


def test_completers_from_fields_lists_and_querysets() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from mcp_django.completion import completer, from_queryset
    from project.shop.models import Order, Product

    # Choices come from the field at registration; the descriptor and the field are the same.
    by_descriptor = completer(Order.status, "t")
    assert by_descriptor("") == ["pending", "paid", "shipped", "cancelled"]
    assert completer(Order._meta.get_field("shipping"), "t")("EX") == ["express"]
    assert completer(["red", "Green", "blue"], "t")("g") == ["Green"]
    with pytest.raises(ImproperlyConfigured, match="is a relation"):
        completer(Order.product, "t")
    with pytest.raises(ImproperlyConfigured, match="name its field"):
        completer(Product.objects.all(), "t")
    with pytest.raises(ImproperlyConfigured, match="has no field 'colour'"):
        from_queryset(Product.objects.all(), "colour")
    with pytest.raises(ImproperlyConfigured, match="a completion is"):
        completer(42, "t")
    # A field without choices: the distinct values its column holds.
    from decimal import Decimal

    Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.00"))
    Product.objects.create(name="Mat", sku="MAT-02", price=Decimal("4.00"))
    names = completer(Product.name, "t")
    assert names("m", ctx=None) == ["Mat", "Mug"]
    assert completer(Product.price, "t")("", ctx=None) == [Decimal("4.00")]


def test_a_registered_prompt_keeps_the_completers_it_was_given() -> None:
    from mcp_django.registry import Registry
    from project.shop.models import Order

    registry = Registry()

    @registry.prompt(completions={"status": Order.status, "colour": _colours})
    def pick(status: str, colour: str) -> str:
        return status

    completions = registry.prompts["pick"].completions
    assert completions["colour"] is _colours
    assert completions["status"]("s") == ["shipped"]


@mcp.resource("completiontest://many/{n}", completions={"n": [f"n{i:03d}" for i in range(150)]})
def completiontest_many(n: str) -> str:
    return n


@pytest.mark.parametrize("send", [_modern, _legacy], ids=["modern", "legacy"])
def test_more_than_a_result_carries_says_has_more(live_url: str, send: Any) -> None:
    many = answer(send(live_url, resource_ref("completiontest://many/{n}", "n", "n")))["result"]["completion"]
    assert many["values"] == [f"n{i:03d}" for i in range(100)] and many["hasMore"] is True
    assert "total" not in many  # unknown: the completer was not read to its end
    few = answer(send(live_url, resource_ref("completiontest://many/{n}", "n", "n14")))["result"]["completion"]
    assert few == {"values": [f"n{i}" for i in range(140, 150)], "total": 10, "hasMore": False}
