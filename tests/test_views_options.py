"""Views as tools: register_view's options and the filters, lookups and serializer fields whose schemas
no other test reaches, each called through the in-process client (mcp_django.testing.MCPClient)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NotRequired, TypedDict

import django_filters
import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from django_tasks_db.models import DBTaskResult
from rest_framework import permissions, serializers, viewsets
from rest_framework.authtoken.models import Token
from rest_framework.decorators import action
from rest_framework.filters import BaseFilterBackend
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_django import mcp
from mcp_django.testing import JSONRPCError, MCPClient
from project.shop.models import Order, Product
from project.shop.serializers import OrderSerializer

pytestmark = pytest.mark.django_db


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names of the tools a test registers on the default registry; removed after the test."""
    names: list[str] = []
    yield names
    for name in names:
        mcp.remove("tools", name)


def register(registered: list[str], view: Any, **options: Any) -> None:
    registered += [t.name for t in mcp.register_view(view, **options)]


def client_for(username: str) -> tuple[User, MCPClient]:
    user = User.objects.create_user(username)
    return user, MCPClient(token=Token.objects.create(user=user).key)


def listed(client: MCPClient) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in client.list_tools()}


# -- django-filter filters as list arguments ----------------------------------------------------------


class NumberInFilter(django_filters.BaseInFilter, django_filters.NumberFilter):
    pass


class OptionsOrderFilter(django_filters.FilterSet):
    quantity = django_filters.RangeFilter(label="Quantity between")
    product_in = NumberInFilter(field_name="product", lookup_expr="in", label="Products")
    status = django_filters.MultipleChoiceFilter(choices=Order.Status.choices)
    products = django_filters.ModelMultipleChoiceFilter(field_name="product", queryset=Product.objects.all())
    created = django_filters.DateFromToRangeFilter(field_name="created_at")

    class Meta:
        model = Order
        fields: list[str] = []


class FilteredOrders(viewsets.ReadOnlyModelViewSet):
    queryset = Order.objects.order_by("id")
    serializer_class = OrderSerializer
    permission_classes = [permissions.IsAuthenticated]
    filter_backends = [DjangoFilterBackend]
    filterset_class = OptionsOrderFilter


def test_range_csv_and_multiple_choice_filters_are_typed_arguments_that_filter(registered: list[str]) -> None:
    register(registered, FilteredOrders, actions=["list"], basename="test_opts_orders")
    alice, client = client_for("alice")
    mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("9.50"), stock=50)
    tea = Product.objects.create(name="Tea", sku="TEA-01", price=Decimal("4.25"), stock=50)
    pot = Product.objects.create(name="Pot", sku="POT-01", price=Decimal("20.00"), stock=50)
    orders = [
        Order.objects.create(owner=alice, product=mug, quantity=1, status=Order.Status.PENDING),
        Order.objects.create(owner=alice, product=tea, quantity=3, status=Order.Status.PAID),
        Order.objects.create(owner=alice, product=pot, quantity=7, status=Order.Status.SHIPPED),
    ]
    ids = [o.pk for o in orders]

    schema = listed(client)["test_opts_orders_list"]["inputSchema"]["properties"]
    assert schema["quantity_min"] == {"type": "number", "description": "Quantity between"}
    assert schema["quantity_max"] == {"type": "number", "description": "Quantity between"}
    assert schema["product_in"] == {"type": "string", "description": "Products (comma-separated values)"}
    assert schema["status"]["type"] == "array"
    assert schema["status"]["items"] == {"enum": ["pending", "paid", "shipped", "cancelled"], "type": "string"}
    assert schema["products"]["items"] == {"type": "integer"}  # the related model's auto id
    assert schema["created_after"]["format"] == schema["created_before"]["format"] == "date"

    def found(arguments: dict[str, Any]) -> list[int]:
        result = client.call_tool("test_opts_orders_list", arguments)
        assert not result.is_error, result.text
        return [row["id"] for row in result.structured["results"]]

    assert found({}) == ids
    assert found({"quantity_min": 2, "quantity_max": 5}) == [ids[1]]
    assert found({"quantity_min": 3}) == ids[1:]
    assert found({"product_in": f"{mug.pk},{pot.pk}"}) == [ids[0], ids[2]]
    assert found({"status": ["paid", "shipped"]}) == ids[1:]
    assert found({"products": [tea.pk, pot.pk]}) == ids[1:]
    today = timezone.localdate()
    assert found({"created_after": today.isoformat()}) == ids
    assert found({"created_before": (today - datetime.timedelta(days=1)).isoformat()}) == []
    # The schema is checked before the view runs: a value outside the enum never reaches it.
    refused = client.call_tool("test_opts_orders_list", {"status": ["lost"]})
    assert refused.is_error and "status" in refused.text


class OwnerBackend(BaseFilterBackend):
    """A project's own backend: ``?mine=true`` keeps the caller's orders."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        if request.query_params.get("mine") == "true":
            return queryset.filter(owner=request.user)
        return queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {"name": "mine", "in": "query", "description": "Only my orders.", "schema": {"type": "boolean"}},
            {"name": "X-Shop", "in": "header", "schema": {"type": "string"}},  # not an argument
        ]


class OwnOrders(viewsets.ReadOnlyModelViewSet):
    queryset = Order.objects.order_by("id")
    serializer_class = OrderSerializer
    permission_classes = [permissions.IsAuthenticated]
    filter_backends = [OwnerBackend]

    @action(detail=False, methods=["get"])
    def count(self, request: Request) -> Response:
        return Response({"at_least": int(request.query_params["at_least"]), "query": sorted(request.query_params)})


def test_another_backends_parameters_and_a_get_actions_arguments_are_the_query(registered: list[str]) -> None:
    at_least = {"type": "object", "properties": {"at_least": {"type": "integer"}}, "required": ["at_least"]}
    register(
        registered, OwnOrders, actions=["list", "count"], basename="test_opts_own", input_schemas={"count": at_least}
    )
    alice, client = client_for("alice")
    bob = User.objects.create_user("bob")
    mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("9.50"), stock=50)
    mine = Order.objects.create(owner=alice, product=mug, quantity=1)
    Order.objects.create(owner=bob, product=mug, quantity=2)
    tools = listed(client)
    assert tools["test_opts_own_list"]["inputSchema"]["properties"] == {
        "mine": {"type": "boolean", "description": "Only my orders."}
    }
    listing = client.call_tool("test_opts_own_list", {"mine": True})
    assert [row["id"] for row in listing.structured["results"]] == [mine.pk]
    assert len(client.call_tool("test_opts_own_list", {}).structured["results"]) == 2
    counted = client.call_tool("test_opts_own_count", {"at_least": 3})
    assert counted.structured == {"at_least": 3, "query": ["at_least"]}


# -- a detail view looked up by a UUID primary key ---------------------------------------------------


class TaskResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = DBTaskResult
        fields = ["id", "task_path", "status"]


class TaskResults(viewsets.ReadOnlyModelViewSet):
    queryset = DBTaskResult.objects.all()
    serializer_class = TaskResultSerializer
    permission_classes = [permissions.IsAuthenticated]


def test_a_uuid_primary_key_is_a_uuid_argument_that_finds_the_row(registered: list[str]) -> None:
    register(registered, TaskResults, actions=["retrieve"], basename="test_opts_results")
    _, client = client_for("alice")
    row = DBTaskResult.objects.create(
        args_kwargs={"args": [], "kwargs": {}},
        task_path="tests.tasks.nothing",
        backend_name="default",
        run_after=timezone.now(),
        exception_class_path="",
        traceback="",
    )

    tool = listed(client)["test_opts_results_retrieve"]
    assert tool["inputSchema"]["properties"]["pk"] == {
        "type": "string",
        "format": "uuid",
        "description": "The Task Result's id.",
    }
    assert tool["inputSchema"]["required"] == ["pk"]
    assert tool["description"] == "Get one Task Result by its pk."

    found = client.call_tool("test_opts_results_retrieve", {"pk": str(row.pk)})
    assert not found.is_error, found.text
    assert found.structured == {"id": str(row.pk), "task_path": "tests.tasks.nothing", "status": "READY"}
    missing = client.call_tool("test_opts_results_retrieve", {"pk": str(uuid.uuid4())})
    assert missing.is_error and missing.structured["status"] == 404
    # format: uuid is checked before the view runs (formats are validated).
    malformed = client.call_tool("test_opts_results_retrieve", {"pk": "not-a-uuid"})
    assert malformed.is_error and "pk" in malformed.text


# -- input_schemas= given as a serializer class and as Python types -----------------------------------


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=20)
    notify = serializers.BooleanField(required=False)


class Echoes(viewsets.ViewSet):
    """Echoes what each call was given (DRF parsed it as JSON)."""

    permission_classes = [permissions.IsAuthenticated]

    @action(detail=True, methods=["post"])
    def flag(self, request: Request, pk: str | None = None) -> Response:
        return Response({"pk": pk, "data": request.data})


@dataclass
class Shipment:
    address: str
    express: bool = False


class Pickup(TypedDict):
    shop: str
    hour: NotRequired[int]


class Deliveries(APIView):
    permission_classes = [permissions.IsAuthenticated]

    def post(self, request: Request) -> Response:
        return Response({"method": "post", "data": request.data})

    def put(self, request: Request) -> Response:
        return Response({"method": "put", "data": request.data})


def test_input_schemas_as_a_serializer_a_dataclass_and_a_typeddict(registered: list[str]) -> None:
    register(registered, Echoes, basename="test_opts_echo", input_schemas={"flag": ReasonSerializer})
    register(
        registered, Deliveries, names={"post": "test_opts_ship", "put": "test_opts_pickup"},
        input_schemas={"post": Shipment, "put": Pickup},
    )  # fmt: skip
    _, client = client_for("alice")
    tools = listed(client)

    flag = tools["test_opts_echo_flag"]["inputSchema"]
    assert flag["required"] == ["pk", "reason"]
    assert flag["properties"]["reason"] == {"type": "string", "maxLength": 20, "title": "Reason", "minLength": 1}
    assert flag["properties"]["notify"]["type"] == "boolean"
    ship = tools["test_opts_ship"]["inputSchema"]
    assert ship["required"] == ["address"]
    assert ship["properties"]["express"] == {"type": "boolean", "default": False}
    pickup = tools["test_opts_pickup"]["inputSchema"]
    assert pickup["required"] == ["shop"] and pickup["properties"]["hour"] == {"type": "integer"}

    flagged = client.call_tool("test_opts_echo_flag", {"pk": "7", "reason": "late", "notify": True})
    assert flagged.structured == {"pk": "7", "data": {"reason": "late", "notify": True}}
    shipped = client.call_tool("test_opts_ship", {"address": "1 High St", "express": True})
    assert shipped.structured == {"method": "post", "data": {"address": "1 High St", "express": True}}
    picked = client.call_tool("test_opts_pickup", {"shop": "north"})
    assert picked.structured == {"method": "put", "data": {"shop": "north"}}

    # Each schema is checked before the view: too long, missing, of the wrong type, not listed.
    for name, arguments, word in (
        ("test_opts_echo_flag", {"pk": "7", "reason": "x" * 21}, "reason"),
        ("test_opts_ship", {"express": True}, "address"),
        ("test_opts_pickup", {"shop": "north", "hour": "noon"}, "hour"),
        ("test_opts_pickup", {"shop": "north", "colour": "red"}, "colour: unexpected argument"),
    ):
        refused = client.call_tool(name, arguments)
        assert refused.is_error and word in refused.text, (name, refused.text)


class OrderNotes(viewsets.ModelViewSet):
    queryset = Order.objects.all()
    serializer_class = OrderSerializer
    permission_classes = [permissions.IsAuthenticated]

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response({"created_from": request.data}, status=201)


def test_input_schemas_replaces_a_standard_actions_serializer_body(registered: list[str]) -> None:
    register(registered, OrderNotes, actions=["create"], basename="test_opts_notes", input_schemas={"create": Pickup})
    _, client = client_for("alice")
    schema = listed(client)["test_opts_notes_create"]["inputSchema"]
    assert set(schema["properties"]) == {"shop", "hour"} and schema["required"] == ["shop"]
    created = client.call_tool("test_opts_notes_create", {"shop": "south", "hour": 9})
    assert created.structured == {"created_from": {"shop": "south", "hour": 9}}
    refused = client.call_tool("test_opts_notes_create", {"product": 1, "quantity": 1})
    assert refused.is_error and "unexpected argument" in refused.text


# -- permissions= on a DRF view's tool ------------------------------------------------------------------


class StockCount(APIView):
    """How many products are in the catalogue."""

    permission_classes = [permissions.IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response({"products": Product.objects.count()})


def test_permissions_option_hides_a_drf_view_tool_from_callers_without_them(registered: list[str]) -> None:
    register(registered, StockCount, name="test_opts_stock", permissions=["shop.add_product"])
    alice, client = client_for("alice")
    # IsAuthenticated grants it; the tool's own permissions= does not.
    assert "test_opts_stock" not in listed(client)
    with pytest.raises(JSONRPCError) as refused:
        client.call_tool("test_opts_stock", {})
    assert refused.value.code == -32602

    alice.user_permissions.add(Permission.objects.get(codename="add_product", content_type__app_label="shop"))
    assert "test_opts_stock" in listed(client)
    counted = client.call_tool("test_opts_stock", {})
    assert not counted.is_error and counted.structured == {"products": 0}


# -- serializer fields whose schemas no other test reaches ---------------------------------------------


class Street(serializers.Serializer):
    street = serializers.CharField(max_length=80)


class Parcel(serializers.Serializer):
    owner = serializers.HiddenField(default=serializers.CurrentUserDefault())
    weights = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=3)
    labels = serializers.DictField(child=serializers.IntegerField())
    size = serializers.ChoiceField(choices=["s", "m"], allow_blank=True)
    tracking = serializers.URLField(required=False)
    # A backreference is Python-only regex syntax: JSON Schema gets no pattern, the field still checks it.
    code = serializers.RegexField(r"^(?P<part>[a-z]+)-(?P=part)\Z", required=False)
    insured = serializers.DecimalField(max_digits=6, decimal_places=2, allow_null=True)
    address = Street(allow_null=True, required=False)
    sender = serializers.SerializerMethodField()

    def get_sender(self, data: dict[str, Any]) -> str:
        return data["owner"].username


class Parcels(APIView):
    """Check a parcel and echo it as the serializer represents it."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = Parcel

    def post(self, request: Request) -> Response:
        parcel = Parcel(data=request.data, context={"request": request})
        parcel.is_valid(raise_exception=True)
        return Response(parcel.data)


def test_serializer_fields_schemas_and_calls(registered: list[str]) -> None:
    register(registered, Parcels, name="test_opts_parcel")
    _, client = client_for("alice")
    schema = listed(client)["test_opts_parcel"]["inputSchema"]
    props = schema["properties"]
    # HiddenField takes its default whatever is sent: it is no argument.
    assert "owner" not in props and "sender" not in props  # sender: read-only
    assert props["weights"]["type"] == "array" and props["weights"]["items"] == {"type": "integer", "minimum": 1}
    assert (props["weights"]["minItems"], props["weights"]["maxItems"]) == (1, 3)
    assert props["labels"]["type"] == "object"
    assert props["size"]["enum"] == ["s", "m", ""]
    assert props["tracking"]["format"] == "uri"
    assert "pattern" not in props["code"]
    assert props["insured"]["type"] == ["number", "string", "null"]
    assert props["address"]["type"] == ["object", "null"]
    assert schema["required"] == ["weights", "labels", "size", "insured"]

    sent = {"weights": [2, 5], "labels": {"fragile": 1}, "size": "", "insured": None, "address": None, "code": "ab-ab"}
    result = client.call_tool("test_opts_parcel", sent)
    assert not result.is_error, result.text
    assert result.structured == {**sent, "sender": "alice"}
    insured = client.call_tool("test_opts_parcel", {**sent, "insured": "12.50", "address": {"street": "High St"}})
    assert insured.structured["insured"] == "12.50" and insured.structured["address"] == {"street": "High St"}
    # What the schema says is refused before the view; what it cannot say, by the serializer.
    for arguments, word in (
        ({**sent, "weights": []}, "weights"),
        ({**sent, "weights": [1, 2, 3, 4]}, "weights"),
        ({**sent, "size": "xl"}, "size"),
        ({**sent, "tracking": "not a url"}, "tracking"),
        ({**sent, "insured": "lots"}, "insured"),
        ({**sent, "owner": 1}, "owner: unexpected argument"),
        ({**sent, "code": "ab-cd"}, "code"),
        ({**sent, "labels": {"fragile": "yes"}}, "labels"),
    ):
        refused = client.call_tool("test_opts_parcel", arguments)
        assert refused.is_error and word in refused.text, (arguments, refused.text)
