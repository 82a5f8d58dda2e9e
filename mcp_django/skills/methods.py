"""The skills extension's part of each method: ``skills/list``, ``skills/get``,
``resources/directory/read``, and skill files in ``resources/list`` and ``resources/read``.

The dispatcher calls these; each takes the request's params and returns the result's
fields (the dispatcher adds the caching hints and what every result carries). Scans and
file reads are blocking file work, so they run in the worker pool.
"""

from __future__ import annotations

import base64
from typing import Any

from ..asks.invoke import run_in_thread
from ..protocol.jsonrpc import InvalidParams
from . import library as lib

EXTENSION = "io.modelcontextprotocol/skills"
METHODS = ("skills/list", "skills/get", "resources/directory/read")


async def _library() -> lib.Library:
    # Scanning reads files: in the pool, unless the process's scan is made already.
    found = lib.cached()
    if found:
        return found
    return await run_in_thread(lib.library)


def _uri(params: dict[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams("params.uri must be a string")
    return uri


def _no_cursor(params: dict[str, Any]) -> None:
    # Every listing fits one page, so no cursor was ever handed out.
    if params.get("cursor") is not None:
        raise InvalidParams("params.cursor is not a cursor this server gave")


def extensions() -> dict[str, Any]:
    """``capabilities.extensions``: the skills extension when at least one skill is served.

    Read on the loop: after a process's first scan it is an attribute read (with DEBUG on,
    a scan of the skill folders, which development can afford).
    """
    return {EXTENSION: {"directoryRead": True}} if lib.library().skills else {}


async def served() -> bool:
    return bool((await _library()).skills)


async def list_skills(params: dict[str, Any]) -> dict[str, Any]:
    _no_cursor(params)
    library = await _library()
    return {"skills": [skill.entry() for skill in library.skills.values()]}


async def get_skill(params: dict[str, Any]) -> dict[str, Any]:
    uri = _uri(params)
    skill = (await _library()).skills.get(uri)
    if skill is None:
        raise InvalidParams(f"Unknown skill: {uri}", {"uri": uri})
    return {"skill": skill.entry()}


async def read_directory(params: dict[str, Any]) -> dict[str, Any]:
    uri = _uri(params)
    _no_cursor(params)
    children = (await _library()).directories.get(uri)
    if children is None:
        raise InvalidParams(f"Not a directory resource: {uri}", {"uri": uri})
    return {"resources": list(children.values())}


async def resources() -> list[dict[str, Any]]:
    """Each skill's SKILL.md, for ``resources/list``."""
    library = await _library()
    return [skill.descriptor() for skill in library.skills.values()]


async def read(uri: str) -> dict[str, Any] | None:
    """One ``resources/read`` contents entry for a skill file, or None when ``uri`` is none."""
    if uri not in (await _library()).files:
        return None
    found = await run_in_thread(lib.read, uri)
    if found is None:
        return None
    file, data = found
    if lib.is_text(file.mime_type):
        try:
            # Text only when it is UTF-8: the client's bytes must be the ones digested.
            return {"uri": uri, "mimeType": file.mime_type, "text": data.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {"uri": uri, "mimeType": file.mime_type, "blob": base64.b64encode(data).decode("ascii")}
