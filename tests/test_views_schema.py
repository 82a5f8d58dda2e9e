"""Views as tools: names, schemas and registration errors (no server), and a failing view (live)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured, PermissionDenied, SuspiciousOperation
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.template import engines
from django.template.response import TemplateResponse
from django.views import View
from rest_framework import generics, serializers
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_django import mcp
from mcp_django.handlers import TOOL_NAME_MAX
from mcp_django.registry import Registry
from mcp_django.schema import serializer_schema
from mcp_django.testing import MCPClient
from mcp_django.views_as_tools import clip_name
from project.shop.models import Order, Product
from project.shop.serializers import OrderSerializer
from project.shop.views import OrderViewSet
from tests.conftest import sdk_client


class Address(serializers.Serializer):
    street = serializers.CharField(max_length=80)
    postcode = serializers.RegexField(r"^\d{5}\Z")


class Delivery(serializers.Serializer):
    address = Address()
    stops = Address(many=True, required=False)
    speed = serializers.ChoiceField(choices=["slow", "fast"], allow_null=True)
    code = serializers.CharField(read_only=True)
    count = serializers.IntegerField(min_value=1, max_value=9)


def test_serializer_input_schema() -> None:
    schema = serializer_schema(Delivery)
    props = schema["properties"]
    assert schema["required"] == ["address", "speed", "count"]
    assert "code" not in props  # read-only
    assert props["address"]["properties"]["postcode"]["pattern"] == r"^\d{5}$"  # \Z is Python-only
    assert props["address"]["required"] == ["street", "postcode"]
    assert props["stops"]["type"] == "array" and props["stops"]["items"]["properties"]["street"]["maxLength"] == 80
    assert props["speed"]["enum"] == ["slow", "fast", None]
    assert (props["count"]["minimum"], props["count"]["maximum"]) == (1, 9)
    out = serializer_schema(Delivery, for_output=True)["properties"]
    assert "code" in out and "pattern" not in out["address"]["properties"]["postcode"]


class Choices(serializers.Serializer):
    flag = serializers.ChoiceField(choices=[True, False])
    sizes = serializers.MultipleChoiceField(choices=["s", "m"])
    level = serializers.ChoiceField(choices=[1, 2], allow_null=True)


def test_choice_fields_are_enums_typed_by_their_values() -> None:
    props = serializer_schema(Choices)["properties"]
    assert props["flag"]["enum"] == [True, False] and "type" not in props["flag"]  # a boolean is no integer
    # An elicitation's multi-select needs its items typed.
    assert props["sizes"]["items"] == {"enum": ["s", "m"], "type": "string"}
    assert (props["level"]["enum"], props["level"]["type"]) == ([1, 2, None], ["integer", "null"])


def ship(request: HttpRequest) -> JsonResponse:
    return JsonResponse({})


# As Python before 3.13 keeps a docstring: its indentation in the text.
ship.__doc__ = "Ship every paid order\n    that is in stock.\n\n    What happens next is not part of the summary.\n    "


def test_a_views_description_is_the_first_paragraph_of_its_docstring() -> None:
    tool = Registry().register_view(ship, input_schema={"type": "object", "properties": {}})[0]
    assert tool.description == "Ship every paid order\nthat is in stock."  # indentation removed


def test_output_schema_says_decimals_are_strings() -> None:
    out = serializer_schema(OrderSerializer, for_output=True)["properties"]
    assert out["total"]["type"] == "string"
    assert serializer_schema(OrderSerializer)["properties"]["quantity"]["type"] == "integer"


def test_viewset_names_and_overrides() -> None:
    registry = Registry()
    tools = registry.register_view(OrderViewSet, actions=["list", "destroy"], names={"destroy": "orders_remove"})
    assert [t.name for t in tools] == ["orders_list", "orders_remove"]
    registry.register_view(OrderViewSet, actions=["list"])  # the same view again: kept once, not a clash
    assert list(registry.tools) == ["orders_list", "orders_remove"]
    assert registry.duplicates == []
    long = registry.register_view(OrderViewSet, actions=["partial_update"], basename="x" * 70)[0]
    assert len(long.name) == TOOL_NAME_MAX and long.name == clip_name("x" * 70 + "_partial_update")
    with pytest.raises(ImproperlyConfigured, match="longer than 64"):
        registry.register_view(OrderViewSet, actions=["list"], name="y" * 65)
    with pytest.raises(ImproperlyConfigured, match="no action"):
        registry.register_view(OrderViewSet, actions=["explode"])


class ProductList(generics.ListCreateAPIView):
    queryset = Product.objects.all()

    class _Serializer(serializers.ModelSerializer):
        class Meta:
            model = Product
            fields = ["id", "name", "price"]

    serializer_class = _Serializer


def test_generic_views_map_methods_to_actions() -> None:
    tools = Registry().register_view(ProductList)
    # The class name's "List" is not said twice (it was product_list_list).
    assert [t.name for t in tools] == ["product_list", "product_create"]
    assert tools[1].input_schema["required"] == ["name", "price"]
    assert tools[0].output_schema["required"] == ["results"]  # no paginator: a {"results": [...]} envelope
    assert [t.description for t in tools] == ["List products.", "Create a product."]


class NoteDetailView(generics.RetrieveUpdateDestroyAPIView):
    queryset = Order.objects.all()
    serializer_class = OrderSerializer


class OrderListCreate(generics.ListCreateAPIView):
    queryset = Order.objects.all()
    serializer_class = OrderSerializer


def test_generic_view_names_end_with_one_action_and_descriptions_take_the_right_article() -> None:
    registry = Registry()
    detail = registry.register_view(NoteDetailView)
    assert {t.name: t.description for t in detail} == {
        "note_retrieve": "Get one order by its pk.",
        "note_update": "Replace an order (every writable field).",
        "note_partial_update": "Change some fields of an order.",
        "note_destroy": "Delete an order.",
    }
    orders = registry.register_view(OrderListCreate)
    assert [t.name for t in orders] == ["order_list", "order_create"]
    assert orders[1].description == "Create an order."
    # basename= is the caller's word, kept as given.
    named = Registry().register_view(OrderListCreate, basename="order_list")
    assert [t.name for t in named] == ["order_list_list", "order_list_create"]


@pytest.mark.parametrize(
    ("noun", "expected"),
    [("order", "an order"), ("product", "a product"), ("user", "a user"), ("hour", "an hour"),
     ("item", "an item"), ("European shipment", "a European shipment"), ("umbrella", "an umbrella")],
)  # fmt: skip
def test_article(noun: str, expected: str) -> None:
    from mcp_django.views_as_tools.tools import with_article

    assert with_article(noun) == expected


class OrderSummaryView(APIView):
    """How many orders you have, by status."""

    def get(self, request: Any) -> Response:
        return Response({})


class Undocumented(APIView):
    def get(self, request: Any) -> Response:
        return Response({})

    def delete(self, request: Any) -> Response:
        return Response({})


def order_summary(request: HttpRequest) -> JsonResponse:
    return JsonResponse({})


def test_views_without_a_method_docstring_are_described_readably() -> None:
    registry = Registry()
    # One handler: the class's docstring says what it does (it read "GET order_summary.").
    assert registry.register_view(OrderSummaryView)[0].description == "How many orders you have, by status."
    # Several handlers and no docstring: a sentence per method, not "GET undocumented."
    assert [t.description for t in registry.register_view(Undocumented)] == [
        "Get the undocumented.",
        "Delete the undocumented.",
    ]
    plain_tool = registry.register_view(order_summary, input_schema={"type": "object", "properties": {}})[0]
    assert plain_tool.description == "Get the order summary."
    # The demo's own tools, as a client lists them.
    assert mcp.tools["orders_summary"].description == "How many orders you have, by status."
    assert mcp.tools["orders_create"].description == "Create an order."


def plain(request: HttpRequest) -> JsonResponse:
    return JsonResponse({})


def test_plain_views_need_an_input_schema() -> None:
    with pytest.raises(ImproperlyConfigured, match="input_schema"):
        Registry().register_view(plain)
    tool = Registry().register_view(plain, input_schema={"type": "object", "properties": {}})[0]
    assert tool.name == "plain"


class Broken(APIView):
    def get(self, request: Any) -> Response:
        raise RuntimeError("secret connection string postgres://admin:hunter2@db")


class Teapot(APIView):
    def post(self, request: Any) -> Response:
        return Response({"detail": "I am a teapot."}, status=418)


@pytest.fixture
def temporary_tools() -> Iterator[None]:
    tools = [*mcp.register_view(Broken, name="test_views_broken"), *mcp.register_view(Teapot, name="test_views_teapot")]
    yield
    for tool in tools:
        mcp.tools.pop(tool.name, None)


@pytest.mark.anyio
async def test_a_failing_view_is_an_error_without_internals(live_url: str, temporary_tools: None) -> None:
    from django.contrib.auth.models import User

    def make() -> str:
        return Token.objects.create(user=User.objects.create_user("carol")).key

    from tests.test_views import orm

    token = orm(make)
    async with sdk_client(live_url, token=token) as client:
        broken = await client.call_tool("test_views_broken", {})
        assert broken.is_error and broken.content[0].text == "The view failed with an internal error."
        teapot = await client.call_tool("test_views_teapot", {})
        assert teapot.is_error and teapot.content[0].text == "HTTP 418: I am a teapot."
    assert not orm(Order.objects.exists)


class Page(View):
    def get(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse()

    def post(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse()


def test_methods_are_named_in_either_case_for_every_kind_of_view() -> None:
    # A plain view's methods were lowered and a DRF view's were not: methods=["GET"] on an
    # APIView said it "does not handle GET".
    for view, given, lower in [(Undocumented, ["GET"], ["get"]), (ProductList, ["POST", "get"], ["post", "get"])]:
        tools = Registry().register_view(view, methods=given)
        assert [t.name for t in tools] == [t.name for t in Registry().register_view(view, methods=lower)]
    assert [t.name for t in tools] == ["product_create", "product_list"]


def test_register_view_refuses_what_it_cannot_make_a_tool_of() -> None:
    registry = Registry()
    given = {"type": "object", "properties": {}}
    with pytest.raises(ImproperlyConfigured, match="body must be 'json' or 'form', not 'xml'"):
        registry.register_view(plain, input_schema=given, body="xml")
    with pytest.raises(ImproperlyConfigured, match="has none of the requested actions or methods"):
        registry.register_view(Teapot, methods=[])
    with pytest.raises(ImproperlyConfigured, match="Teapot does not handle PUT"):
        registry.register_view(Teapot, methods=["put"])
    with pytest.raises(ImproperlyConfigured, match="name= names one tool"):
        registry.register_view(Page, name="page", input_schema=given)
    with pytest.raises(ImproperlyConfigured, match="is not a view"):
        registry.register_view(42, input_schema=given)
    # A schema for GET only: a plain view's POST says nothing of its body.
    with pytest.raises(ImproperlyConfigured, match="page needs input_schema="):
        registry.register_view(Page, input_schemas={"get": given})


def answers(request: HttpRequest) -> HttpResponseBase:
    """What a plain view may answer, by ?kind=."""
    kind = request.GET.get("kind") or request.POST.get("kind")
    if kind == "missing":
        raise Http404("no such row")
    if kind == "forbidden":
        raise PermissionDenied
    if kind == "suspicious":
        raise SuspiciousOperation("tampered")
    if kind == "gateway":
        return HttpResponse("upstream down", status=502)
    if kind == "redirect":
        return HttpResponseRedirect("/login/")
    if kind == "empty":
        return HttpResponse(status=204)
    if kind == "html":
        return HttpResponse("<h1>Hello</h1>\n  <p>there</p>", content_type="text/html")
    if kind == "not-json":
        return HttpResponse("{oops", content_type="application/json")
    if kind == "stream":
        return StreamingHttpResponse(iter([b"[1, ", b"2]"]), content_type="application/json")
    if kind == "template":
        return TemplateResponse(request, engines["django"].from_string("Hi {{ who }}."), {"who": "Ann"})
    return JsonResponse({"kind": kind, "method": request.method})


@pytest.fixture
def answering_tools() -> Iterator[None]:
    schema = {"type": "object", "properties": {"kind": {"type": "string"}}}
    tools = [
        *mcp.register_view(answers, name="test_views_answers", input_schema=schema),
        *mcp.register_view(answers, name="test_views_form", methods=["POST"], body="form", input_schema=schema),
    ]
    yield
    for tool in tools:
        mcp.tools.pop(tool.name, None)


@pytest.mark.django_db
def test_what_a_plain_view_answers_is_the_tools_result(answering_tools: None) -> None:
    client = MCPClient()

    def call(kind: str) -> Any:
        return client.call_tool("test_views_answers", {"kind": kind})

    for kind, text in (
        ("missing", "Not found."),
        ("forbidden", "Permission denied."),
        ("suspicious", "Bad request."),
        ("gateway", "The view failed (HTTP 502)."),
        ("redirect", "The view redirected (HTTP 302) to /login/."),
    ):
        result = call(kind)
        assert result.is_error and result.text == text, kind
    for kind, text in (
        ("empty", "Done (HTTP 204)."),
        ("html", "Hello there"),
        ("not-json", "{oops"),
        ("template", "Hi Ann."),
    ):
        result = call(kind)
        assert not result.is_error and result.text == text, kind
    streamed = call("stream")
    assert streamed.structured == {"results": [1, 2]}  # structured content is an object
    # body="form": the arguments arrive as a form, in request.POST.
    assert client.call_tool("test_views_form", {"kind": "sent"}).structured == {"kind": "sent", "method": "POST"}
