"""The example of docs/endpoints.md, verbatim (tests/test_endpoints.py checks that it is)."""

from django.contrib.auth.models import User
from django.test import TestCase

from mcp_django.testing import JSONRPCError, MCPClient


class StaffEndpointTests(TestCase):
    def test_the_staff_tools_are_served_at_staff_mcp_only(self):
        sam = User.objects.create_user("sam", is_staff=True)
        staff = MCPClient(user=sam, path="/staff/mcp")
        assert {tool["name"] for tool in staff.list_tools()} == {"orders_by_status", "mark_shipped"}
        assert staff.call_tool("orders_by_status").structured["shipped"] == 0
        try:
            MCPClient(user=sam).call_tool("orders_by_status")  # at /mcp
        except JSONRPCError as error:
            assert error.code == -32602  # Unknown tool: not this endpoint's
        else:
            raise AssertionError("/mcp served a tool of /staff/mcp")

    def test_customers_are_not_let_in(self):
        # A signed-in customer: the staff endpoint lets the session in, its tools are for staff.
        carl = MCPClient(user=User.objects.create_user("carl"), path="/staff/mcp")
        assert carl.list_tools() == []
        try:
            MCPClient(path="/staff/mcp").list_tools()  # no credentials at all
        except JSONRPCError as error:
            assert error.status == 401  # ALLOW_ANONYMOUS is off for this endpoint
        else:
            raise AssertionError("/staff/mcp let an anonymous caller in")
