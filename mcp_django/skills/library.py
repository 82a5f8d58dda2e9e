"""The skills served (docs/skills.md), found as Django finds templates. A scan reads every file once (the
digests published are of those bytes); requests look URIs up in its tables, so no path is built from what a
client sends. What it left out is kept as ``problems``, which the system check reports."""

from __future__ import annotations

import functools
import hashlib
import mimetypes
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles.utils import matches_patterns
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.signals import setting_changed

from ..asks.invoke import run_in_thread
from ..conf import mcp_settings

SKILL_FILE = "SKILL.md"
APP_FOLDER = "mcp_skills"
SCHEME = "skill://"
DIRECTORY = "inode/directory"
# What SEP-2640 says a server should not serve in one skill.
MAX_FILES = 512
MAX_BYTES = 16 * 1024 * 1024
# Frontmatter metadata keys that only MCP extensions may define.
RESERVED_PREFIX = "io.modelcontextprotocol/"
# Never served: collectstatic's default ignore patterns (plus Python's byte code), matched as it matches them.
IGNORED = ("CVS", ".*", "*~", "__pycache__")
# Characters a URI path segment keeps as they are (RFC 3986 pchar, less "%").
_SEGMENT_SAFE = "-._~!$&'()*+,;=:@"
_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/x-sh", "application/javascript")


@dataclass(frozen=True)
class SkillFile:
    uri: str
    path: Path
    size: int
    digest: str
    mime_type: str

    def descriptor(self) -> dict[str, Any]:
        return {"uri": self.uri, "name": self.path.name, "mimeType": self.mime_type, "size": self.size}


@dataclass(frozen=True)
class Skill:
    uri: str  # its SKILL.md
    frontmatter: dict[str, Any]
    files: tuple[SkillFile, ...]
    origin: str

    def entry(self) -> dict[str, Any]:
        """The skill as ``skills/list`` and ``skills/get`` give it."""
        return {
            "uri": self.uri,
            "frontmatter": self.frontmatter,
            "resources": [{"uri": f.uri, "digest": f.digest, "size": f.size} for f in self.files],
        }

    def descriptor(self) -> dict[str, Any]:
        """Its SKILL.md in ``resources/list``: named and described by its frontmatter."""
        manifest = next(f for f in self.files if f.uri == self.uri)
        return {
            "uri": self.uri,
            "name": self.frontmatter["name"],
            "description": self.frontmatter["description"],
            "mimeType": "text/markdown",
            "size": manifest.size,
        }


@dataclass
class Library:
    skills: dict[str, Skill] = field(default_factory=dict)  # by SKILL.md URI
    files: dict[str, SkillFile] = field(default_factory=dict)  # every served file, by URI
    directories: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # URI -> children by URI
    # What the scan left out (an error, skills.E...) or warns about, as the system checks report it.
    problems: list[CheckMessage] = field(default_factory=list)

    def report(self, check_id: str, message: str, hint: str) -> None:
        kind = Error if check_id.rpartition(".")[2].startswith("E") else Warning
        self.problems.append(kind(message, hint=hint, id=check_id))


def sources() -> list[tuple[str, Path]]:
    """(origin, folder): SKILLS_DIRS first, then each installed app's mcp_skills/, in INSTALLED_APPS order."""
    found = [(f"MCP_DJANGO['SKILLS_DIRS'] {path}", path) for path in mcp_settings.SKILLS_DIRS]
    for config in apps.get_app_configs():
        folder = Path(config.path) / APP_FOLDER
        if folder.is_dir():
            found.append((f"app {config.label!r} ({folder})", folder))
    return found


def scan() -> Library:
    library = Library()
    names: dict[str, list[str]] = {}
    for origin, folder in sources():
        if not folder.is_dir():
            library.report(
                "mcp_django.skills.W003",
                f"MCP_DJANGO['SKILLS_DIRS'] names {folder}, which is not a directory: no skill is found there.",
                "Create it, or correct or remove the entry.",
            )
            continue
        for skill_dir in [current for current, files in _walk(folder) if SKILL_FILE in files]:
            skill = _load(library, origin, folder, skill_dir)
            if skill is None:
                continue
            if skill.uri in library.skills:
                library.report(
                    "mcp_django.skills.W001",
                    f"The skill {skill.uri} of {origin} is hidden by the one of {library.skills[skill.uri].origin}.",
                    "Rename one of the folders; if the project means to replace an app's skill, "
                    "silence mcp_django.skills.W001 (SILENCED_SYSTEM_CHECKS).",
                )
                continue
            library.skills[skill.uri] = skill
            names.setdefault(skill.frontmatter["name"], []).append(skill.uri)
            _add_files(library, skill)
    for name, uris in names.items():
        if len(uris) > 1:
            library.report(
                "mcp_django.skills.W002",
                f"{len(uris)} skills are named {name!r}: {', '.join(uris)}. Clients tell them apart by "
                "their paths, but a model sees the names.",
                "Give each skill a name of its own (the folder's name and the frontmatter's name).",
            )
    library.skills = dict(sorted(library.skills.items()))
    return library


def _walk(folder: Path) -> list[tuple[Path, list[str]]]:
    """(directory, its file names) under ``folder``, sorted, ignored names left out."""
    out = []
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not matches_patterns(d, IGNORED))
        out.append((Path(current), sorted(f for f in files if not matches_patterns(f, IGNORED))))
    return out


def _uri(segments: tuple[str, ...]) -> str:
    return SCHEME + "/".join(quote(segment, safe=_SEGMENT_SAFE) for segment in segments)


def _load(library: Library, origin: str, folder: Path, skill_dir: Path) -> Skill | None:
    # PyYAML is imported with the first SKILL.md read.
    from .manifest import ManifestError, parse

    segments = skill_dir.relative_to(folder).parts
    manifest_path = skill_dir / SKILL_FILE
    if not segments:
        library.report(
            "mcp_django.skills.E003",
            f"{manifest_path} of {origin} is not in a skill's folder: it is not served.",
            "Move it and its files into a folder named after the skill (<folder>/<name>/SKILL.md).",
        )
        return None
    manifest_uri = _uri((*segments, SKILL_FILE))
    try:
        frontmatter = parse(manifest_path.read_bytes())
    except ManifestError as exc:
        library.report(
            exc.check_id,
            f"{manifest_path} {exc}: the skill {manifest_uri} is not served.",
            "SKILL.md opens with '---', YAML fields with at least name and description, and '---' "
            "(the Agent Skills specification).",
        )
        return None
    if frontmatter["name"] != segments[-1]:
        library.report(
            "mcp_django.skills.E003",
            f"{manifest_path} is named {frontmatter['name']!r} but its folder is {segments[-1]!r}: "
            f"the skill {manifest_uri} is not served.",
            "A skill's folder has the skill's name: rename one of them.",
        )
        return None
    metadata = frontmatter.get("metadata")
    reserved = sorted(k for k in metadata if k.startswith(RESERVED_PREFIX)) if isinstance(metadata, dict) else []
    if reserved:
        library.report(
            "mcp_django.skills.W005",
            f"{manifest_path} has metadata keys under {RESERVED_PREFIX!r}, which MCP extensions reserve "
            f"and clients ignore: {', '.join(reserved)}.",
            "Name them without that prefix (a prefix of your own, such as your domain reversed).",
        )
    root = skill_dir.resolve()
    paths: list[tuple[tuple[str, ...], Path]] = []
    for current, names in _walk(skill_dir):
        for name in names:
            path = current / name
            if not path.resolve().is_relative_to(root):
                library.report(
                    "mcp_django.skills.W004",
                    f"{path} leads outside the skill's folder {skill_dir}: it is not served.",
                    "Copy the file into the skill's folder instead of linking to it.",
                )
                continue
            paths.append(((*segments, *path.relative_to(skill_dir).parts), path))
    total = sum(path.stat().st_size for _, path in paths)
    if len(paths) > MAX_FILES or total > MAX_BYTES:
        library.report(
            "mcp_django.skills.E004",
            f"The skill {manifest_uri} of {origin} has {len(paths)} files of {total} bytes in all: "
            f"more than the {MAX_FILES} files or {MAX_BYTES} bytes a skill may have. It is not served.",
            "Split it into smaller skills, or move large files out of its folder.",
        )
        return None
    files: list[SkillFile] = []
    for parts, path in paths:
        data = path.read_bytes()
        files.append(SkillFile(_uri(parts), path, len(data), digest(data), mime_type(path.name)))
    return Skill(manifest_uri, frontmatter, tuple(files), origin)


def _add_files(library: Library, skill: Skill) -> None:
    """The skill's files and every directory from its root down (shared with a skill nested in it)."""
    root = skill.uri.removesuffix(f"/{SKILL_FILE}")
    library.directories.setdefault(root, {})
    for file in skill.files:
        library.files.setdefault(file.uri, file)
        parent = root
        for segment in file.uri[len(root) + 1 :].split("/")[:-1]:
            child = f"{parent}/{segment}"
            library.directories[parent][child] = {"uri": child, "name": segment, "mimeType": DIRECTORY}
            library.directories.setdefault(child, {})
            parent = child
        library.directories[parent][file.uri] = file.descriptor()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def mime_type(name: str) -> str:
    if name.endswith(".md"):
        return "text/markdown"  # not in every platform's mimetypes table
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


_scanned = functools.cache(scan)


def library() -> Library:
    """The scan requests are answered from: one per process, or a fresh one per call with DEBUG on."""
    return scan() if settings.DEBUG else _scanned()


async def alibrary() -> Library:
    """:func:`library` on the event loop: a scan, which reads every file, runs in the worker pool."""
    if settings.DEBUG or not _scanned.cache_info().currsize:
        return await run_in_thread(library)
    return _scanned()


forget = _scanned.cache_clear


def read(uri: str) -> tuple[SkillFile, bytes] | None:
    """A served file and its bytes as they are now (a file changed since the scan is scanned
    again: the bytes always match the digest a new ``skills/get`` gives)."""
    for rescan in (False, True):
        if rescan:
            forget()
        file = library().files.get(uri)
        if file is None:
            return None
        try:
            data = file.path.read_bytes()
        except OSError:
            continue
        found = digest(data)
        if rescan or found == file.digest:
            return replace(file, size=len(data), digest=found), data
    return None


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("MCP_DJANGO", "INSTALLED_APPS", "DEBUG"):
        forget()


setting_changed.connect(_on_setting_changed)


@register()
def check_skills(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """What a scan of the skill folders left out or warns about (mcp_django.skills.*)."""
    if "mcp_django.skills.methods" not in mcp_settings.EXTENSIONS or "SKILLS_DIRS" in dict(mcp_settings.problems()):
        return []  # not served; or check_settings reports it
    return scan().problems
