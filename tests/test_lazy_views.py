"""Views registered by dotted path: built when first needed, and still listed, called, checked and shown.

The demo's server (as bench/run.py starts it) serves the bench's calls without importing the
shop's views, and with them DRF's serializers, filters and pagination; the first listing builds
them. A path that names nothing fails at registration when its module is missing, and at
``manage.py check`` (E015) when the module lacks it or the options do not fit the view.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_django import Registry
from mcp_django.checks import handler_problems

ROOT = Path(__file__).resolve().parent.parent

# What the shop's views import and no call of the bench uses (rest_framework.compat imports
# requests, PyYAML's loaders, Pygments and django.contrib.postgres with psycopg).
HEAVY = [
    "project.shop.views",
    "rest_framework.serializers",
    "rest_framework.fields",
    "rest_framework.compat",
    "rest_framework.viewsets",
    "django.contrib.postgres.fields",
    "requests",
    # The authorization server's validator (it imports requests too): only OAuth requests need it.
    "oauth2_provider.oauth2_validators",
    # PyYAML: read with the first SKILL.md, which no call of the bench needs.
    "yaml",
]

DEMO = """
import json, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
import project.asgi  # what uvicorn imports
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from mcp_django.testing import MCPClient, accept

HEAVY = %r
out = {"at_start": [m for m in HEAVY if m in sys.modules]}
user = User.objects.create_superuser("bench", password="x")
token = Token.objects.create(user=user).key
anonymous, owner = MCPClient(), MCPClient(token=token)
# The bench's scenarios: echo (anonymous, and with a DRF token), the async tool, the
# three-request flow, a task's tasks/get.
assert anonymous.call_tool("echo", {"text": "hi"}).text == "hi"
assert owner.call_tool("echo", {"text": "hi"}).text == "hi"
assert anonymous.call_tool("reverse", {"text": "abc"}).text == "cba"
answers = {"Step 1: What is your name?": {"name": "Ada"}, "Step 2: What is your favorite color?": {"color": "teal"}}
flow = anonymous.call_tool("test_input_required_result_multi_round", answer=lambda q: accept(answers[q.message]))
assert flow.text == "Ada likes teal.", flow.text
tasks = MCPClient(tasks=True, run_tasks=False)
task = tasks.start_tool("slow_compute", {"seconds": 3600})
assert tasks.get_task(task["taskId"])["status"] == "working"
out["after_calls"] = [m for m in HEAVY if m in sys.modules]
# The first listing builds the views: their tools are there, in registration order.
out["listed"] = [t["name"] for t in owner.list_tools()]
out["after_listing"] = [m for m in HEAVY if m in sys.modules]
out["called"] = owner.call_tool("orders_summary").structured
print(json.dumps(out))
"""


def run_demo(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    # The bench's settings (bench/run.py main()).
    env.update(
        DJANGO_SETTINGS_MODULE="project.conformance.settings",
        DJANGO_DEBUG="0",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        MCP_REQUEST_STATE_KEY="lazy-views-request-state-key-0123456789abc",
        MCP_ALLOW_ANONYMOUS="1",
        ALLOWED_HOSTS="testserver",  # the in-process client's and Django's test client's host
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def app_in_the_demo(tmp_path: Path, name: str, **modules: str) -> None:
    """An app ``name`` with ``modules`` (module name -> source) and ``badsettings``: the demo's
    settings with the app installed, both importable by :func:`run_demo`'s processes."""
    app = tmp_path / name
    app.mkdir()
    (app / "__init__.py").write_text("")
    for module, source in modules.items():
        (app / f"{module}.py").write_text(source)
    (tmp_path / "badsettings.py").write_text(
        f"from project.conformance.settings import *  # noqa\nINSTALLED_APPS = [*INSTALLED_APPS, {name!r}]\n"
    )


def test_the_demo_serves_the_bench_calls_without_importing_the_shop_views(tmp_path: Path) -> None:
    done = run_demo(tmp_path, DEMO % (HEAVY,))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["at_start"] == [] and out["after_calls"] == []
    listed = out["listed"]
    shop = ["products_list", "orders_list", "orders_cancel", "orders_summary", "stock_report"]
    assert set(shop) <= set(listed)
    # Where eager registration put them: after the demo's tools, before refund_order (registered after them).
    assert listed.index("echo") < listed.index("products_list") < listed.index("refund_order")
    assert "project.shop.views" in out["after_listing"] and "rest_framework.serializers" in out["after_listing"]
    assert out["called"] == {"total": 0, "by_status": {}}


ADMIN = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from django.test import Client
admin = Client()
admin.force_login(User.objects.create_superuser("staff", password="x"))
page = admin.get("/admin/mcp_django/registeredhandler/?q=project.shop.views")
assert page.status_code == 200, page.status_code
print(page.content.decode())
"""


def test_the_admin_and_mcp_handlers_show_the_views_registered_by_path(tmp_path: Path) -> None:
    done = run_demo(tmp_path, ADMIN)
    assert done.returncode == 0, done.stderr
    for name in ("products_list", "orders_cancel", "orders_summary", "stock_report"):
        assert f">{name}<" in done.stdout
    script = (
        "import django; django.setup()\nfrom django.core.management import call_command\ncall_command('mcp_handlers')\n"
    )
    done = run_demo(tmp_path, script)
    assert done.returncode == 0, done.stderr
    for name in ("products_list", "orders_cancel", "orders_summary", "stock_report"):
        assert name in done.stdout


def test_manage_py_check_reports_a_path_naming_nothing(tmp_path: Path) -> None:
    app_in_the_demo(
        tmp_path,
        "badviews",
        views="",
        mcp="from mcp_django import mcp\n"
        "mcp.register_view('badviews.views.NoSuchViewSet')\n"
        "mcp.register_view('project.shop.views.OrderViewSet', actions=['refund'], basename='bad')\n",
    )
    script = "import django; django.setup()\nfrom django.core.management import call_command\ncall_command('check')\n"
    env_script = "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'badsettings'\n" + script
    done = run_demo(tmp_path, env_script)
    assert done.returncode != 0
    assert "mcp_django.E015" in done.stderr
    assert "badviews.views.NoSuchViewSet" in done.stderr and "does not define" in done.stderr
    assert "OrderViewSet has no action(s) refund" in done.stderr


def test_a_path_to_a_missing_module_or_not_a_path_fails_at_registration() -> None:
    registry = Registry()
    with pytest.raises(ImproperlyConfigured, match=re.escape("no module 'project.shop.no_such_module'")):
        registry.register_view("project.shop.no_such_module.OrderViewSet")
    with pytest.raises(ImproperlyConfigured, match=re.escape("no module 'nosuchpackage.views'")):
        registry.register_view("nosuchpackage.views.OrderViewSet")
    with pytest.raises(ImproperlyConfigured, match="not a dotted path"):
        registry.register_view("OrderViewSet")
    with pytest.raises(ImproperlyConfigured, match="not a dotted path"):
        registry.register_view("project.shop.views.Order ViewSet")
    with pytest.raises(TypeError, match="unexpected option"):
        registry.register_view("project.shop.views.OrderViewSet", action=["list"])
    assert not registry.tools.waiting


def test_a_path_naming_nothing_in_its_module_fails_at_every_use_and_in_the_check() -> None:
    registry = Registry()

    @registry.tool()
    def ping() -> str:
        return "pong"

    registry.register_view("project.shop.views.NoSuchView")
    # A tool that is there is found without building the waiting view.
    assert registry.tools.get("ping") is not None and registry.tools.waiting
    for use in (lambda: registry.tools.get("other"), lambda: list(registry.tools.values()), registry.all_handlers):
        with pytest.raises(ImproperlyConfigured, match="NoSuchView"):
            use()
    errors = handler_problems(registry)
    assert [e.id for e in errors] == ["mcp_django.E015"]
    assert "project.shop.views.NoSuchView" in errors[0].msg
    assert registry.tools.waiting  # not forgotten: it fails again rather than serving without it


def test_views_by_path_are_built_once_in_registration_order_and_first_of_a_name_wins() -> None:
    from project.shop.views import OrderSummary

    def build(lazy: bool) -> Registry:
        registry = Registry()

        @registry.tool()
        def first() -> str:
            return "1"

        registry.register_view("project.shop.views.OrderSummary" if lazy else OrderSummary, name="summary")

        @registry.tool(name="summary")
        def clash() -> str:
            return "registered after the view: ignored (E006)"

        @registry.tool()
        def last() -> str:
            return "2"

        return registry

    eager, lazy = build(False), build(True)
    # Registration built nothing: until the view is built, the later tool holds its name.
    assert lazy.tools.waiting and lazy.tools.ready["summary"].source.endswith("clash")
    assert list(lazy.tools) == list(eager.tools) == ["first", "summary", "last"]
    assert lazy.tools["summary"].source == eager.tools["summary"].source == "project.shop.views.OrderSummary:get"
    assert lazy.duplicates == eager.duplicates
    assert [e.id for e in handler_problems(lazy)] == ["mcp_django.E006"]


def test_register_view_by_path_returns_the_tools_it_makes_when_read() -> None:
    registry = Registry()
    made = registry.register_view("project.shop.views.ProductViewSet", actions=["list", "retrieve"])
    assert registry.tools.waiting
    assert [t.name for t in made] == ["products_list", "products_retrieve"]
    assert not registry.tools.waiting and registry.tools["products_list"] is made[0]


def test_a_tool_registered_again_from_the_same_source_keeps_its_place() -> None:
    registry = Registry()

    def again() -> str:
        return "a"

    registry.tool()(again)
    registry.register_view("project.shop.views.OrderSummary", name="summary")
    registry.tool()(again)  # its module imported twice: the same source, replaced in place
    assert list(registry.tools) == ["again", "summary"] and not registry.duplicates
