"""Skills (SEP-2640): the demo's skills through the official SDK client on a live server, both
eras; refusals (unknown skills, traversal, non-directories) with their JSON-RPC codes and HTTP
statuses; the finders, the frontmatter reader and a test per system check id."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
import yaml
from django.core import checks
from mcp import MCPError
from pydantic import ConfigDict

from mcp_django.skills import library as lib
from mcp_django.skills.library import check_skills
from mcp_django.skills.manifest import ManifestError, parse
from mcp_django.testing import JSONRPCError, MCPClient
from tests.conftest import Raw, mcp_settings, sdk_client

EXTENSION = "io.modelcontextprotocol/skills"
SHOP = Path(__file__).resolve().parent.parent / "project" / "shop" / "mcp_skills"
REFUNDS = "skill://shop-refunds/SKILL.md"
POLICY = "skill://shop-refunds/references/refund-policy.md"
# URIs that would name a served file if a server resolved them as paths: none may.
TRAVERSALS = [
    "skill://shop-refunds/../shop-restock/SKILL.md",
    "skill://shop-refunds/references/../SKILL.md",
    "skill://shop-refunds/%2e%2e/shop-restock/SKILL.md",
    "skill://shop-refunds/references%2f..%2fSKILL.md",
    "skill://shop-refunds/./SKILL.md",
    "skill://shop-refunds//SKILL.md",
    "skill://../project/settings.py",
    "skill://shop-refunds/../../../../settings.py",
    "skill:///etc/passwd",
    "file:///etc/passwd",
]


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def frontmatter_of(path: Path) -> dict[str, Any]:
    """Read independently of the server's reader: PyYAML's own safe loader."""
    text = path.read_text()
    return yaml.safe_load(text.split("---\n")[1])


# -- the official SDK client on the live server ------------------------------------------


class Loose(types.Result):
    """A result the SDK has no type for (skills/*, resources/directory/read): fields kept as sent."""

    model_config = ConfigDict(extra="allow")


async def send(client: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    request = types.Request[dict[str, Any], str](method=method, params=params or {})
    result = await client.session.send_request(request, Loose)
    return result.model_dump(by_alias=True, exclude_none=True)


def file_bytes(contents: Any) -> bytes:
    text = getattr(contents, "text", None)
    return text.encode() if text is not None else base64.b64decode(contents.blob)


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_sdk_client_lists_gets_and_reads_the_demo_skills(live_url: str, mode: str) -> None:
    async with sdk_client(live_url, mode=mode) as client:
        if mode == "legacy":
            extensions = client.session.server_capabilities.extensions  # from initialize
        else:  # a client pinned to 2026-07-28 holds placeholder capabilities until it discovers
            extensions = (await client.session.send_discover(mode))["capabilities"]["extensions"]
        assert extensions[EXTENSION] == {"directoryRead": True}
        listed = await send(client, "skills/list")
        assert [s["uri"] for s in listed["skills"]] == [REFUNDS, "skill://shop-restock/SKILL.md"]
        entry = listed["skills"][0]
        assert entry["frontmatter"] == frontmatter_of(SHOP / "shop-refunds" / "SKILL.md")
        assert [r["uri"] for r in entry["resources"]] == [REFUNDS, POLICY]
        # Every listed file reads back as the bytes its digest and size promise.
        for resource in entry["resources"]:
            read = await client.read_resource(resource["uri"])
            data = file_bytes(read.contents[0])
            assert sha256(data) == resource["digest"] and len(data) == resource["size"]
            assert read.contents[0].mime_type == "text/markdown"
        assert data == (SHOP / "shop-refunds" / "references" / "refund-policy.md").read_bytes()
        got = await send(client, "skills/get", {"uri": REFUNDS})
        assert got["skill"] == entry and "nextCursor" not in got
        if mode == "2026-07-28":
            assert {"ttlMs", "cacheScope"} <= set(listed) and {"ttlMs", "cacheScope"} <= set(got)
        # resources/list shows each SKILL.md, named and described by its frontmatter.
        manifests = {str(r.uri): r for r in (await client.list_resources()).resources if str(r.uri).startswith("skill")}
        assert manifests[REFUNDS].name == "shop-refunds"
        assert manifests[REFUNDS].description == entry["frontmatter"]["description"]
        assert manifests[REFUNDS].mime_type == "text/markdown"


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_sdk_client_walks_a_skill_directory(live_url: str, mode: str) -> None:
    async with sdk_client(live_url, mode=mode) as client:
        root = await send(client, "resources/directory/read", {"uri": "skill://shop-refunds"})
        assert root["resources"] == [
            {
                "uri": REFUNDS,
                "name": "SKILL.md",
                "mimeType": "text/markdown",
                "size": len((SHOP / "shop-refunds" / "SKILL.md").read_bytes()),
            },
            {"uri": "skill://shop-refunds/references", "name": "references", "mimeType": "inode/directory"},
        ]
        below = await send(client, "resources/directory/read", {"uri": "skill://shop-refunds/references"})
        assert [r["uri"] for r in below["resources"]] == [POLICY]
        # A file, a trailing slash, an unknown folder: not directories (-32602, the spec's code).
        for uri in (REFUNDS, POLICY, "skill://shop-refunds/", "skill://shop-refunds/scripts", "skill://nope"):
            with pytest.raises(MCPError) as caught:
                await send(client, "resources/directory/read", {"uri": uri})
            assert caught.value.error.code == -32602, uri


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_sdk_client_is_refused_unknown_skills_and_traversal(live_url: str, mode: str) -> None:
    not_found = -32602 if mode == "2026-07-28" else -32002  # resources/read's code in each era
    async with sdk_client(live_url, mode=mode) as client:
        for uri in [*TRAVERSALS, "skill://shop-refunds/references/missing.md"]:
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert caught.value.error.code == not_found, uri
        # skills/get answers only for a skill's SKILL.md.
        for uri in [*TRAVERSALS, POLICY, "skill://shop-refunds", "skill://mcp-unknown-skill/SKILL.md"]:
            with pytest.raises(MCPError) as caught:
                await send(client, "skills/get", {"uri": uri})
            assert caught.value.error.code == -32602, uri
        with pytest.raises(MCPError) as caught:
            await send(client, "skills/get", {})
        assert caught.value.error.code == -32602


@pytest.mark.django_db(transaction=True)
def test_refusals_are_client_errors_over_http(raw: Raw) -> None:
    cases = [
        ("skills/get", {"uri": "skill://shop-refunds/../shop-restock/SKILL.md"}, -32602, 400),
        ("skills/get", {"uri": 7}, -32602, 400),
        ("skills/list", {"cursor": "page-2"}, -32602, 400),
        ("resources/directory/read", {"uri": ["skill://shop-refunds"]}, -32602, 400),
        ("resources/directory/read", {"uri": "skill://shop-refunds/references/.."}, -32602, 400),
        ("resources/read", {"uri": "skill://shop-refunds/references/../SKILL.md"}, -32602, 400),
    ]
    for method, params, code, status in cases:
        response = raw.post(method, params)
        assert (response.status_code, response.json()["error"]["code"]) == (status, code), (method, params)


# -- in process: the finders, the checks, what a scan serves ------------------------------


@pytest.fixture
def skills_dir(tmp_path: Path, settings: Any) -> Iterator[Path]:
    """An empty SKILLS_DIRS folder served alongside the demo's; DEBUG off (one scan per process)."""
    settings.DEBUG = False
    folder = tmp_path / "skills"
    folder.mkdir()
    with mcp_settings(SKILLS_DIRS=[folder]):
        yield folder
    lib.forget()


def write_skill(
    folder: Path,
    path: str,
    description: str = "A test skill.",
    *,
    name: str | None = None,
    extra: str = "",
    files: dict[str, bytes] | None = None,
) -> Path:
    skill = folder / path
    skill.mkdir(parents=True, exist_ok=True)
    header = f"name: {name or path.rsplit('/', 1)[-1]}\ndescription: {description}\n{extra}"
    (skill / "SKILL.md").write_text(f"---\n{header}---\n\n# {path}\n")
    for rel, data in (files or {}).items():
        (skill / rel).parent.mkdir(parents=True, exist_ok=True)
        (skill / rel).write_bytes(data)
    return skill


def ids() -> list[str]:
    return [str(m.id) for m in check_skills()]


@pytest.mark.django_db
def test_a_project_folder_adds_skills_with_prefixes_nesting_and_binary_files(skills_dir: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    write_skill(skills_dir, "acme/billing/refunds", files={"examples/email one.md": b"Dear customer", "logo.png": png})
    write_skill(skills_dir, "acme/billing/refunds/partial")  # nested: a skill, and files of the one around it
    (skills_dir / "acme" / "billing" / "refunds" / ".DS_Store").write_bytes(b"ignored")
    assert ids() == []
    client = MCPClient()
    entries = {s["uri"]: s for s in client.request("skills/list")["skills"]}
    outer = entries["skill://acme/billing/refunds/SKILL.md"]
    assert [r["uri"] for r in outer["resources"]] == [
        "skill://acme/billing/refunds/SKILL.md",
        "skill://acme/billing/refunds/logo.png",
        "skill://acme/billing/refunds/examples/email%20one.md",
        "skill://acme/billing/refunds/partial/SKILL.md",
    ]
    assert "skill://acme/billing/refunds/partial/SKILL.md" in entries and REFUNDS in entries
    logo = client.read_resource("skill://acme/billing/refunds/logo.png").contents[0]
    assert logo["mimeType"] == "image/png" and base64.b64decode(logo["blob"]) == png
    assert sha256(png) in [r["digest"] for r in outer["resources"]]
    email = client.read_resource("skill://acme/billing/refunds/examples/email%20one.md").contents[0]
    assert email["text"] == "Dear customer"
    children = client.request("resources/directory/read", {"uri": "skill://acme/billing/refunds"})["resources"]
    assert {c["name"]: c["mimeType"] for c in children} == {
        "SKILL.md": "text/markdown",
        "examples": "inode/directory",
        "logo.png": "image/png",
        "partial": "inode/directory",
    }


@pytest.mark.django_db
def test_an_edited_file_is_served_with_its_new_digest(skills_dir: Path) -> None:
    skill = write_skill(skills_dir, "notes", files={"notes.md": b"first"})
    client = MCPClient()
    old = client.request("skills/get", {"uri": "skill://notes/SKILL.md"})["skill"]
    (skill / "notes.md").write_bytes(b"second version")
    assert client.read_resource("skill://notes/notes.md").contents[0]["text"] == "second version"
    new = client.request("skills/get", {"uri": "skill://notes/SKILL.md"})["skill"]
    assert new != old
    assert {"uri": "skill://notes/notes.md", "digest": sha256(b"second version"), "size": 14} in new["resources"]


@pytest.mark.django_db
def test_without_skills_the_extension_is_not_declared(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    settings.DEBUG = False
    monkeypatch.setattr(lib, "APP_FOLDER", "no_such_folder")
    lib.forget()
    try:
        client = MCPClient()
        capabilities = client.request("server/discover")["capabilities"]
        assert "io.modelcontextprotocol/skills" not in capabilities.get("extensions", {})
        for method in ("skills/list", "skills/get", "resources/directory/read"):
            with pytest.raises(JSONRPCError) as caught:
                client.request(method, {"uri": REFUNDS})
            assert (caught.value.code, caught.value.status) == (-32601, 404)
    finally:
        lib.forget()


def test_frontmatter_is_read_as_yaml_1_2_core() -> None:
    raw = b"---\nname: demo\ndescription: d\nflag: on\nplain: 010\nwhen: 2026-01-01\nyes: true\nhex: 0x1f\n---\nbody"
    assert parse(raw) == {
        "name": "demo",
        "description": "d",
        "flag": "on",
        "plain": 10,
        "when": "2026-01-01",
        "yes": True,
        "hex": 31,
    }
    assert parse(b"\xef\xbb\xbf---\r\nname: demo\r\ndescription: d\r\n---\r\n")["name"] == "demo"


@pytest.mark.parametrize(
    ("raw", "check_id"),
    [
        (b"# no frontmatter\n", "mcp_django.skills.E001"),
        (b"---\nname: [unclosed\n---\n", "mcp_django.skills.E001"),
        (b"---\n- a list\n---\n", "mcp_django.skills.E001"),
        (b"\xff\xfe---\n", "mcp_django.skills.E001"),
        (b"---\nname: demo\n---\n", "mcp_django.skills.E002"),
        (b"---\nname: Demo_Skill\ndescription: d\n---\n", "mcp_django.skills.E002"),
        (b"---\nname: demo--x\ndescription: d\n---\n", "mcp_django.skills.E002"),
        (b"---\nname: demo\ndescription: '" + b"x" * 1025 + b"'\n---\n", "mcp_django.skills.E002"),
        (b"---\nname: demo\ndescription: d\nscore: .inf\n---\n", "mcp_django.skills.E002"),
        (b"---\nname: demo\ndescription: d\n1: one\n---\n", "mcp_django.skills.E002"),
    ],
)
def test_bad_frontmatter_is_refused_with_its_check_id(raw: bytes, check_id: str) -> None:
    with pytest.raises(ManifestError) as caught:
        parse(raw)
    assert caught.value.check_id == check_id


@pytest.mark.django_db
def test_e001_no_frontmatter(skills_dir: Path) -> None:
    (skills_dir / "bare").mkdir()
    (skills_dir / "bare" / "SKILL.md").write_text("# Just a heading\n")
    assert ids() == ["mcp_django.skills.E001"]
    assert "skill://bare/SKILL.md" not in lib.scan().skills


@pytest.mark.django_db
def test_e002_bad_fields(skills_dir: Path) -> None:
    write_skill(skills_dir, "empty", description="''")
    assert ids() == ["mcp_django.skills.E002"]
    with pytest.raises(JSONRPCError) as caught:
        MCPClient().request("skills/get", {"uri": "skill://empty/SKILL.md"})
    assert caught.value.code == -32602


@pytest.mark.django_db
def test_e003_name_and_folder_differ(skills_dir: Path) -> None:
    write_skill(skills_dir, "folder-name", name="other-name")
    (skills_dir / "SKILL.md").write_text("---\nname: loose\ndescription: d\n---\n")
    assert ids() == ["mcp_django.skills.E003", "mcp_django.skills.E003"]
    assert not [uri for uri in lib.scan().skills if "name" in uri or "loose" in uri]


@pytest.mark.django_db
def test_e004_over_the_limits(skills_dir: Path) -> None:
    write_skill(skills_dir, "many", files={f"f/{i}.txt": b"x" for i in range(lib.MAX_FILES)})  # 513 with SKILL.md
    write_skill(skills_dir, "within", files={f"f/{i}.txt": b"x" for i in range(lib.MAX_FILES - 1)})
    big = write_skill(skills_dir, "large")
    with open(big / "data.bin", "wb") as out:
        out.truncate(lib.MAX_BYTES)  # with SKILL.md, one file over 16 MiB in all
    assert ids() == ["mcp_django.skills.E004", "mcp_django.skills.E004"]
    assert set(lib.scan().skills) & {"skill://many/SKILL.md", "skill://large/SKILL.md", "skill://within/SKILL.md"} == {
        "skill://within/SKILL.md"
    }


@pytest.mark.django_db
def test_w001_a_project_skill_hides_an_apps(skills_dir: Path) -> None:
    write_skill(skills_dir, "shop-refunds", description="The project's own refund steps.")
    found = check_skills()
    assert [m.id for m in found] == ["mcp_django.skills.W001"] and "app 'shop'" in found[0].msg
    entry = MCPClient().request("skills/get", {"uri": REFUNDS})["skill"]
    assert entry["frontmatter"]["description"] == "The project's own refund steps."


@pytest.mark.django_db
def test_w002_one_name_twice(skills_dir: Path) -> None:
    write_skill(skills_dir, "billing/refunds")
    write_skill(skills_dir, "support/refunds")
    assert ids() == ["mcp_django.skills.W002"]
    uris = [s["uri"] for s in MCPClient().request("skills/list")["skills"]]
    assert {"skill://billing/refunds/SKILL.md", "skill://support/refunds/SKILL.md"} <= set(uris)


@pytest.mark.django_db
def test_w003_missing_folder(tmp_path: Path) -> None:
    with mcp_settings(SKILLS_DIRS=[tmp_path / "missing"]):
        assert ids() == ["mcp_django.skills.W003"]


@pytest.mark.django_db
def test_w004_a_link_out_of_the_skill(skills_dir: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for clients")
    skill = write_skill(skills_dir, "linked", files={"inside.md": b"ok"})
    os.symlink(secret, skill / "outside.txt")
    os.symlink(skill / "inside.md", skill / "alias.md")  # a link within the skill is served
    assert ids() == ["mcp_django.skills.W004"]
    uris = [
        r["uri"] for r in MCPClient().request("skills/get", {"uri": "skill://linked/SKILL.md"})["skill"]["resources"]
    ]
    assert uris == ["skill://linked/SKILL.md", "skill://linked/alias.md", "skill://linked/inside.md"]
    with pytest.raises(JSONRPCError) as caught:
        MCPClient().read_resource("skill://linked/outside.txt")
    assert caught.value.code == -32602


def test_skills_dirs_of_the_wrong_type_is_e010() -> None:
    with mcp_settings(SKILLS_DIRS="skills"):
        found = [
            m for m in checks.run_checks() if m.id in ("mcp_django.E010",) or str(m.id).startswith("mcp_django.skills")
        ]
    assert [m.id for m in found] == ["mcp_django.E010"] and "SKILLS_DIRS" in found[0].msg


def test_the_check_is_registered_and_the_demo_is_clean() -> None:
    assert [m for m in checks.run_checks() if str(m.id).startswith("mcp_django.skills")] == []


@pytest.mark.django_db
def test_the_example_of_docs_skills_md(db: None) -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "skills.md").read_text()
    block = text.split("<!-- tested: tests/test_skills.py runs this block -->\n```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/skills.md", "exec"), namespace)
    namespace["test_refund_skill_is_served"](db)


@pytest.mark.django_db
def test_w005_reserved_metadata_keys(skills_dir: Path) -> None:
    extra = "metadata:\n  io.modelcontextprotocol/owner: me\n  acme.example/owner: me\n"
    write_skill(skills_dir, "reserved", extra=extra)
    found = check_skills()
    assert [m.id for m in found] == ["mcp_django.skills.W005"] and "acme.example" not in found[0].msg
    assert "skill://reserved/SKILL.md" in lib.scan().skills  # a warning: still served
