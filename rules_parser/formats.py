"""Which rule-file format a path and text are: the seed-003 template or a tool's own file.

The path decides first, because tools find their files by name (``AGENTS.md``,
``.cursor/rules/*.mdc``…); only a path no tool claims is classified by content: a document
that declares template metadata (Layer, AuthoritativeFor, Topics, Severity) or a ``Rule:``
title is a template, anything else plain markdown.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from rules_parser.models import Format

__all__ = [
    "declares_template",
    "detect_format",
    "path_format",
    "roo_mode",
    "rule_name_from_path",
    "slugify",
]

_TEMPLATE_KEY_RE = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?\s*(?:layer|authoritative[ _-]?for|topics|severity)\s*"
    r"(?::\s*(?:\*\*|__)|(?:\*\*|__)?\s*:)",
    re.I | re.M,
)
_RULE_TITLE_RE = re.compile(r"^#\s+rule\s*:", re.I | re.M)
_SLUG_RE = re.compile(r"[^a-z0-9]+")


def _parts(path: str) -> list[str]:
    return [p for p in PurePosixPath(path.replace("\\", "/")).parts if p not in ("", ".")]


def path_format(path: str) -> Format | None:
    """The tool format a path belongs to, or None when no tool claims it.

    Args:
        path: a file path, relative or absolute, ``/`` or ``\\`` separated.

    Returns:
        A foreign format name or None.
    """
    parts = _parts(path)
    if not parts:
        return None
    name = parts[-1]
    lowered = name.lower()
    dirs = [p.lower() for p in parts[:-1]]
    if lowered in ("agents.md", "agent.md"):
        return "agents_md"
    if lowered in ("claude.md", "claude.local.md"):
        return "claude_md"
    if lowered.endswith(".mdc") or lowered == ".cursorrules":
        return "cursor_mdc"
    if ".cursor" in dirs and "rules" in dirs:
        return "cursor_mdc"
    if lowered == ".clinerules" or ".clinerules" in dirs:
        return "clinerules"
    if lowered == ".roorules" or lowered.startswith((".roorules-", ".clinerules-")):
        return "roo_rules"
    if ".roo" in dirs:
        index = dirs.index(".roo")
        if index + 1 < len(dirs) and (
            dirs[index + 1] == "rules" or dirs[index + 1].startswith("rules-")
        ):
            return "roo_rules"
    if lowered == "copilot-instructions.md" or lowered.endswith(".instructions.md"):
        return "copilot_instructions"
    return None


def declares_template(text: str) -> bool:
    """True when the text declares seed-003 metadata or has a ``# Rule:`` title."""
    return bool(_TEMPLATE_KEY_RE.search(text) or _RULE_TITLE_RE.search(text))


def detect_format(path: str, text: str) -> Format:
    """Detect the format of a rule file from its path, then its content.

    Args:
        path: the file's path (only its name and parent folders are looked at).
        text: the file's text.

    Returns:
        One of ``template``, ``agents_md``, ``claude_md``, ``cursor_mdc``, ``clinerules``,
        ``roo_rules``, ``copilot_instructions``, ``plain_markdown``.
    """
    claimed = path_format(path)
    if claimed is not None:
        return claimed
    return "template" if declares_template(text) else "plain_markdown"


def roo_mode(path: str) -> str | None:
    """The Roo mode a path is scoped to: ``.roo/rules-{mode}/…`` or ``.roorules-{mode}``.

    Args:
        path: a file path.

    Returns:
        The mode slug, or None for files that apply to every mode.
    """
    parts = [p.lower() for p in _parts(path)]
    for index, part in enumerate(parts[:-1]):
        if part == ".roo" and parts[index + 1].startswith("rules-"):
            return parts[index + 1][len("rules-") :] or None
    name = parts[-1] if parts else ""
    for prefix in (".roorules-", ".clinerules-"):
        if name.startswith(prefix):
            return name[len(prefix) :] or None
    return None


def slugify(text: str) -> str:
    """Lower-case, ASCII letters and digits joined by single hyphens."""
    return _SLUG_RE.sub("-", text.lower()).strip("-")


def rule_name_from_path(path: str) -> str:
    """A stable rule name from a file name: ``security-secrets.md`` -> ``security-secrets``.

    Tool suffixes are dropped (``python.instructions.md`` -> ``python``); dot files keep
    their name (``.clinerules`` -> ``clinerules``).

    Args:
        path: a file path.

    Returns:
        A slug, possibly empty when the path has no usable name.
    """
    parts = _parts(path)
    if not parts:
        return ""
    name = parts[-1].lower()
    for suffix in (".instructions.md", ".mdc", ".md", ".markdown", ".txt"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    return slugify(name)
