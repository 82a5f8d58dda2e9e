"""What the demo's server holds once started: no module that only some requests use.

jsonschema-rs is imported by the first call with an ``input_schema=`` dict or a dict schema
(an elicitation's), not at registration; cryptography by the first sealed requestState
(``ENCRYPT_REQUEST_STATE``) or the OAuth toolkit's OpenID Connect keys, not at start-up (the
keys derive on the standard library's HMAC; the demo defers ``jwcrypto.jwk``, which the
toolkit's models import). Started as bench/run.py starts it (tests/test_lazy_views.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_lazy_views import app_in_the_demo, run_demo

LAZY = ["jsonschema_rs", "cryptography"]

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

LAZY = %r
out = {"at_start": [m for m in LAZY if m in sys.modules]}
token = Token.objects.create(user=User.objects.create_user("bench")).key
anonymous, owner = MCPClient(), MCPClient(token=token)
# The bench's calls but the flow: echo (anonymous, with a DRF token), the async tool, tasks/get.
assert anonymous.call_tool("echo", {"text": "hi"}).text == "hi"
assert owner.call_tool("echo", {"text": "hi"}).text == "hi"
assert anonymous.call_tool("reverse", {"text": "abc"}).text == "cba"
tasks = MCPClient(tasks=True, run_tasks=False)
task = tasks.start_tool("slow_compute", {"seconds": 3600})
assert tasks.get_task(task["taskId"])["status"] == "working"
out["after_calls"] = [m for m in LAZY if m in sys.modules]
# The flow's answers are checked against its dict schemas; its requestState is signed, not sealed.
answers = {"Step 1: What is your name?": {"name": "Ada"}, "Step 2: What is your favorite color?": {"color": "teal"}}
flow = anonymous.call_tool("test_input_required_result_multi_round", answer=lambda q: accept(answers[q.message]))
assert flow.text == "Ada likes teal.", flow.text
out["after_flow"] = [m for m in LAZY if m in sys.modules]
# A tool given input_schema= still refuses what its schema refuses (compiled at its first call).
try:
    refused = anonymous.call_tool("json_schema_2020_12_tool", {"name": "Ada"})
    out["refused"] = [refused.is_error, refused.text]
except Exception as exc:  # refused as a JSON-RPC error
    out["refused"] = [True, str(exc)]
out["accepted"] = anonymous.call_tool("json_schema_2020_12_tool", {"name": "Ada", "email": "a@b.c"}).text
# The toolkit's OpenID Connect key: jwcrypto.jwk (and cryptography) loaded by this first use.
from oauth2_provider.models import Application
app = Application(client_secret="s3cret", algorithm=Application.HS256_ALGORITHM)
out["jwk"] = json.loads(app.jwk_key.export())
out["after_jwk"] = [m for m in LAZY if m in sys.modules]
print(json.dumps(out))
"""


def test_the_demo_starts_without_what_only_some_requests_use(tmp_path: Path) -> None:
    done = run_demo(tmp_path, DEMO % (LAZY,))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["at_start"] == [] and out["after_calls"] == []
    assert out["after_flow"] == ["jsonschema_rs"]
    assert out["refused"][0] is True and "'email' is a required property" in out["refused"][1].replace('"', "'")
    assert out["accepted"] == 'Received: {"name":"Ada","email":"a@b.c"}'
    assert out["jwk"] == {"k": "czNjcmV0", "kty": "oct"} and out["after_jwk"] == LAZY


def test_a_deferred_module_loads_at_its_first_attribute_read(tmp_path: Path) -> None:
    package = tmp_path / "deferring"
    package.mkdir()
    (package / "__init__.py").write_text("ran = []\n")
    (package / "heavy.py").write_text("from deferring import ran\nran.append('heavy')\nVALUE = 42\n")
    script = """
import sys
from project import lazy_imports
lazy_imports.defer("deferring.heavy")
from deferring import heavy, ran
bound = list(ran)
value = heavy.VALUE
print(heavy is sys.modules["deferring.heavy"], bound, value, ran)
lazy_imports.defer("deferring.heavy")  # already there: kept as it is
lazy_imports.defer("no_such_package.module")  # not installed: nothing to defer
print(sys.modules["deferring.heavy"] is heavy, "no_such_package.module" in sys.modules, ran)
"""
    done = run_demo(tmp_path, script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "[]", "42", "['heavy']", "True", "False", "['heavy']"]


BAD_SCHEMA = """
import os
os.environ["DJANGO_SETTINGS_MODULE"] = "badsettings"
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
import project.asgi
from mcp_django.testing import JSONRPCError, MCPClient
client = MCPClient()
assert client.call_tool("echo", {"text": "hi"}).text == "hi"  # the process started and serves
try:
    client.call_tool("broken_schema", {"a": "x"})
except JSONRPCError as exc:
    print("call", exc.code)
try:
    call_command("check")
except Exception as exc:
    print("check", exc)
"""


def test_a_schema_its_meta_schema_refuses_is_reported_by_check_and_fails_its_calls(tmp_path: Path) -> None:
    app_in_the_demo(
        tmp_path,
        "badschema",
        mcp="from mcp_django import mcp\n"
        "@mcp.tool(input_schema={'type': 'object', 'properties': {'a': {'type': 'nonsense'}}})\n"
        "def broken_schema(**arguments): return 'never'\n",
    )
    done = run_demo(tmp_path, BAD_SCHEMA)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "call -32603"
    assert "mcp_django.E016" in done.stdout + done.stderr
    assert "tool 'broken_schema': input_schema is not a valid JSON schema" in done.stdout + done.stderr
