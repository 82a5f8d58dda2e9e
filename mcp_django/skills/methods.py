"""The skills extension on :mod:`mcp_django.extensions`' points (its methods, declaration and resources);
scans and file reads run in the worker pool."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from .. import content, extensions
from ..asks.call import Call
from ..asks.invoke import run_in_thread
from ..protocol.jsonrpc import METHOD_NOT_FOUND, InvalidParams, MCPError
from . import library as lib

EXTENSION = "io.modelcontextprotocol/skills"


def _find(table: dict[str, Any], params: dict[str, Any], unknown: str) -> Any:
    """The entry of ``table`` that ``params.uri`` names; InvalidParams when it names none."""
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams("params.uri must be a string")
    if uri not in table:
        raise InvalidParams(f"{unknown}: {uri}", {"uri": uri})
    return table[uri]


def _no_cursor(params: dict[str, Any]) -> None:
    # Every listing fits one page, so no cursor was ever handed out.
    if params.get("cursor") is not None:
        raise InvalidParams("params.cursor is not a cursor this server gave")


def register() -> None:
    """Plug the extension in (``MCP_DJANGO["EXTENSIONS"]`` lists ``mcp_django.skills.methods``)."""
    extensions.add_method("skills/list", _served(list_skills), cache_hints=True)
    extensions.add_method("skills/get", _served(get_skill), cache_hints=True)
    extensions.add_method("resources/directory/read", _served(read_directory))
    extensions.declare_extension(EXTENSION, declared)
    extensions.add_resources(resources, read)


def declared() -> dict[str, Any] | None:
    """The extension's settings while at least one skill is served (else not declared)."""
    return {"directoryRead": True} if lib.library().skills else None


def _served(method: Callable[[lib.Library, dict[str, Any]], dict[str, Any]]) -> Any:
    """The method, where a skill is served: elsewhere it does not exist (-32601)."""

    async def run(call: Call) -> dict[str, Any]:
        library = await lib.alibrary()
        if not library.skills:
            raise MCPError(METHOD_NOT_FOUND, f"Method not found: {call.method}")
        return method(library, call.params)

    return run


def list_skills(library: lib.Library, params: dict[str, Any]) -> dict[str, Any]:
    _no_cursor(params)
    return {"skills": [skill.entry() for skill in library.skills.values()]}


def get_skill(library: lib.Library, params: dict[str, Any]) -> dict[str, Any]:
    return {"skill": _find(library.skills, params, "Unknown skill").entry()}


def read_directory(library: lib.Library, params: dict[str, Any]) -> dict[str, Any]:
    children = _find(library.directories, params, "Not a directory resource")
    _no_cursor(params)
    return {"resources": list(children.values())}


async def resources() -> list[dict[str, Any]]:
    """Each skill's SKILL.md, for ``resources/list``."""
    library = await lib.alibrary()
    return [skill.descriptor() for skill in library.skills.values()]


async def read(uri: str) -> dict[str, Any] | None:
    """One ``resources/read`` contents entry for a skill file, or None when ``uri`` is none."""
    if uri not in (await lib.alibrary()).files:
        return None
    found = await run_in_thread(lib.read, uri)
    if found is None:
        return None
    file, data = found
    value: bytes | str = data
    if lib.is_text(file.mime_type):
        with contextlib.suppress(UnicodeDecodeError):
            # Text only when it is UTF-8: the client's bytes must be the ones digested.
            value = data.decode("utf-8")
    return content.resource_contents(uri, value, file.mime_type)
