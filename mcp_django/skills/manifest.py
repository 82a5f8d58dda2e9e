"""A SKILL.md's YAML frontmatter (the Agent Skills specification), read with YAML 1.2's core schema, not
PyYAML's YAML 1.1 defaults (``on`` True, ``010`` 8, dates): clients compare it with what their parsers read."""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

# name: 1-64 characters, lowercase letters, digits and hyphens, no hyphen first, last or twice.
NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
DESCRIPTION_MAX = 1024
# A leading "---" line, the YAML, a closing "---" line (a BOM and CRLF line ends allowed).
_FRONTMATTER = re.compile(r"^\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)


class ManifestError(ValueError):
    """A SKILL.md that cannot be served; ``check_id`` is the system check reporting it."""

    def __init__(self, message: str, check_id: str) -> None:
        super().__init__(message)
        self.check_id = check_id


class _CoreLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars."""


_REPLACED = {f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float", "timestamp")}
_CoreLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# YAML 1.2's core-schema scalars: their tag, pattern, and the characters they can begin with.
for _name, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+.0123456789",
    ),
):
    _CoreLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_name}", re.compile(_pattern), list(_first))


def _core_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    value = str(loader.construct_scalar(node))
    return int(value, {"0o": 8, "0x": 16}.get(value[:2], 10))  # "010" is ten in YAML 1.2


_CoreLoader.add_constructor("tag:yaml.org,2002:int", _core_int)


def parse(raw: bytes) -> dict[str, Any]:
    """The frontmatter of a SKILL.md's bytes as a JSON object; ``ManifestError`` says what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError("is not UTF-8 text", "mcp_django.skills.E001") from None
    frontmatter = _FRONTMATTER.match(text)
    if frontmatter is None:
        raise ManifestError(
            "does not begin with YAML frontmatter (a '---' line, the fields, a closing '---' line)",
            "mcp_django.skills.E001",
        )
    try:
        data = yaml.load(frontmatter.group(1), Loader=_CoreLoader)  # a SafeLoader subclass: no object construction
    except yaml.YAMLError as exc:
        raise ManifestError(f"has frontmatter that is not valid YAML: {exc}", "mcp_django.skills.E001") from None
    if not isinstance(data, dict):
        raise ManifestError(
            f"has frontmatter that is not a mapping of fields but {type(data).__name__}", "mcp_django.skills.E001"
        )
    where = _not_json(data, "")
    if where is not None:
        raise ManifestError(f"has a frontmatter value JSON cannot carry ({where})", "mcp_django.skills.E002")
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not NAME.match(name):
        raise ManifestError(
            f"has the name {name!r}: a name is 1-64 lowercase letters, digits and hyphens, "
            "with no hyphen first, last or twice in a row",
            "mcp_django.skills.E002",
        )
    if not isinstance(description, str) or not description.strip() or len(description) > DESCRIPTION_MAX:
        raise ManifestError(
            f"has no description of 1-{DESCRIPTION_MAX} characters (it has {description!r:.80})",
            "mcp_django.skills.E002",
        )
    return data


def _not_json(value: Any, where: str) -> str | None:
    """Where in ``value`` something is that JSON has no form for, or None."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where or 'a value'} is {value}"
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _not_json(item, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"the key {key!r} of {where or 'the frontmatter'} is not a string"
            found = _not_json(item, f"{where}.{key}" if where else key)
            if found:
                return found
        return None
    return f"{where or 'a value'} is a {type(value).__name__}"
