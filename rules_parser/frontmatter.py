"""Read the YAML-ish front matter rule files use, without a YAML dependency.

Cursor ``.mdc`` files, Copilot ``*.instructions.md`` files and template documents put a small
mapping between ``---`` lines at the top. What they use is a narrow subset of YAML, and Cursor
itself writes values that are not valid YAML (``globs: *.tsx,*.ts`` would be an alias), so a
strict YAML parser would reject real files. Supported here:

- ``key: value`` with plain, single- or double-quoted scalars;
- flow lists ``[a, "b"]``; booleans ``true``/``false``/``yes``/``no``; ``null`` / ``~``;
- block lists (``key:`` then ``- item`` lines) and block scalars (``key: |`` or ``>``);
- comments (``# …``) on their own line.

Anything else (nested mappings, anchors) is kept as the raw string and reported as a warning
by the caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["FrontMatter", "FrontMatterValue", "split_front_matter"]

FrontMatterValue = str | bool | None | list[str]

_KEY_RE = re.compile(r"^(?P<key>[A-Za-z_][\w\- ]*?)\s*:(?:\s+(?P<value>.*?))?\s*$")


@dataclass
class FrontMatter:
    """Parsed front matter: values, the line of each key, and lines that could not be read."""

    values: dict[str, FrontMatterValue] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    line_start: int = 1
    line_end: int = 1


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if value[0] == '"':
            return inner.replace('\\"', '"').replace("\\\\", "\\")
        return inner.replace("''", "'")
    return value


def _strip_comment(value: str) -> str:
    # A " #" starts a comment in plain scalars; not inside quotes.
    if value and value[0] in "\"'":
        close = value.find(value[0], 1)
        rest = value[close + 1 :].strip() if close > 0 else ""
        return value[: close + 1] if close > 0 and rest.startswith("#") else value
    hit = value.find(" #")
    return value[:hit].rstrip() if hit >= 0 else value


def _split_flow(inner: str) -> list[str]:
    items: list[str] = []
    buf: list[str] = []
    quote = ""
    for ch in inner:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            buf.append(ch)
        elif ch == ",":
            items.append("".join(buf).strip())
            buf = []
        else:
            buf.append(ch)
    items.append("".join(buf).strip())
    return [_unquote(i) for i in items if i]


def _scalar(raw: str) -> FrontMatterValue:
    value = _strip_comment(raw.strip())
    lowered = value.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("", "null", "~"):
        return None
    if value.startswith("[") and value.endswith("]"):
        return _split_flow(value[1:-1])
    return _unquote(value)


def split_front_matter(lines: list[str]) -> FrontMatter | None:
    """Find and parse front matter at the top of a document.

    Args:
        lines: the document's lines (without line endings).

    Returns:
        The parsed front matter, or None when the document does not start with ``---`` or the
        block is never closed (then the text is ordinary markdown).
    """
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return None
    fm = FrontMatter(line_start=1, line_end=end + 1)
    key: str | None = None
    block_scalar: list[str] | None = None
    folded = False
    for index in range(1, end):
        line = lines[index]
        lineno = index + 1
        stripped = line.strip()
        if block_scalar is not None and key is not None:
            if line.startswith((" ", "\t")) or not stripped:
                block_scalar.append(stripped)
                fm.values[key] = (" " if folded else "\n").join(block_scalar).strip()
                continue
            block_scalar = None
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") or stripped == "-":
            if key is not None and (fm.values.get(key) is None or isinstance(fm.values[key], list)):
                current = fm.values.get(key)
                items = current if isinstance(current, list) else []
                item = _scalar(stripped[1:])
                items.append(item if isinstance(item, str) else str(item).lower())
                fm.values[key] = items
                continue
            fm.unreadable.append((lineno, stripped))
            continue
        match = _KEY_RE.match(stripped) if not line.startswith((" ", "\t")) else None
        if match is None:
            fm.unreadable.append((lineno, stripped))
            continue
        key = match.group("key").strip()
        raw = match.group("value") or ""
        fm.lines[key] = lineno
        if raw.strip() in ("|", ">", "|-", ">-", "|+", ">+"):
            block_scalar = []
            folded = raw.strip().startswith(">")
            fm.values[key] = ""
            continue
        fm.values[key] = _scalar(raw)
    return fm
