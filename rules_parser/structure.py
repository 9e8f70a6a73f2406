"""Document structure shared by the template and foreign parsers.

Splits a block tree into *segments* (a heading and the blocks up to the next heading), keeps
heading breadcrumbs, reads ``Key: value`` metadata lines, and renders blocks back to compact
markdown for directive details.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from rules_parser.blocks import (
    Block,
    BlockQuote,
    Fence,
    Heading,
    ListBlock,
    ListItem,
    Other,
    Paragraph,
)
from rules_parser.formats import slugify
from rules_parser.frontmatter import FrontMatter
from rules_parser.inference import split_severity_marker
from rules_parser.models import CodeExample, Section

__all__ = [
    "DocContext",
    "KeyValue",
    "Segment",
    "block_span",
    "clean_inline",
    "directive_key",
    "fence_example",
    "item_statement",
    "iter_fences",
    "metadata_key",
    "parse_key_value",
    "render_blocks",
    "sections_of",
    "segments_of",
    "split_list_value",
]

# "**Layer:** x", "**Layer**: x", "Layer: x", "__Topics__ : a, b"
_KV_RE = re.compile(
    r"^\s*(?:\*\*|__)?\s*(?P<key>[A-Za-z][A-Za-z0-9 _\-]{0,40}?)\s*"
    r"(?:(?:\*\*|__)\s*:|:\s*(?:\*\*|__)?)\s*(?P<value>.*)$"
)

# Canonical metadata keys and the spellings people use for them.
_KEY_ALIASES = {
    "layer": "layer",
    "authoritativefor": "authoritative_for",
    "authority": "authoritative_for",
    "topics": "topics",
    "topic": "topics",
    "tags": "topics",
    "severity": "severity",
    "defaultseverity": "severity",
    "whentoapply": "when_to_apply",
    "relatedrules": "related_rules",
    "related": "related_rules",
    "description": "description",
    "globs": "globs",
    "glob": "globs",
    "applyto": "globs",
    "paths": "globs",
    "alwaysapply": "always_apply",
    "name": "rule_name",
    "rulename": "rule_name",
    "id": "rule_name",
    "title": "title",
    "rationale": "rationale",
}


def metadata_key(raw: str) -> str | None:
    """The canonical metadata key for a spelling (``Authoritative For`` -> ``authoritative_for``)."""
    return _KEY_ALIASES.get(re.sub(r"[^a-z]", "", raw.lower()))


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    raw_key: str
    value: str
    line: int
    column: int


def parse_key_value(line: str, lineno: int) -> KeyValue | None:
    """Read one ``Key: value`` line whose key is a known metadata key, else None."""
    match = _KV_RE.match(line)
    if match is None:
        return None
    key = metadata_key(match.group("key"))
    if key is None:
        return None
    column = match.start("value") + 1
    return KeyValue(key, match.group("key").strip(), match.group("value").strip(), lineno, column)


def split_list_value(value: str) -> list[str]:
    """Split ``a, b; c`` or ``[a, "b"]`` into clean items (backticks and quotes removed)."""
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    items = re.split(r"\s*[,;]\s*", value)
    return [i.strip().strip("`\"'").strip() for i in items if i.strip().strip("`\"'").strip()]


def clean_inline(text: str) -> str:
    """Collapse soft line breaks to spaces and trim; inline markdown is kept."""
    return " ".join(part.strip() for part in text.split("\n")).strip()


@dataclass
class Segment:
    """A heading (None for text before the first heading) and the blocks that follow it."""

    heading: Heading | None
    path: tuple[str, ...]
    blocks: list[Block] = field(default_factory=list)

    @property
    def level(self) -> int:
        return self.heading.level if self.heading else 0

    @property
    def title(self) -> str:
        return self.path[-1] if self.path else ""


def heading_label(text: str) -> str:
    """A heading's text for breadcrumbs: severity marker and ``Rule:`` prefix removed."""
    _, rest = split_severity_marker(text)
    rest = re.sub(r"^rule\s*:\s*", "", rest, flags=re.I)
    return clean_inline(rest)


def segments_of(blocks: tuple[Block, ...]) -> list[Segment]:
    """Split top-level blocks at headings, tracking each heading's breadcrumb."""
    segments = [Segment(None, ())]
    stack: list[tuple[int, str]] = []
    for block in blocks:
        if isinstance(block, Heading):
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, heading_label(block.text)))
            segments.append(Segment(block, tuple(label for _, label in stack)))
        else:
            segments[-1].blocks.append(block)
    return segments


def sections_of(segments: list[Segment]) -> tuple[Section, ...]:
    """The ``Section`` values for every heading."""
    return tuple(
        Section(path=s.path, level=s.heading.level, line=s.heading.line_start)
        for s in segments
        if s.heading is not None
    )


def block_span(blocks: list[Block] | tuple[Block, ...]) -> tuple[int, int] | None:
    """First and last line covered by ``blocks``, or None when empty."""
    if not blocks:
        return None
    return blocks[0].line_start, max(b.line_end for b in blocks)


def fence_example(fence: Fence, *, anti: bool) -> CodeExample:
    """A ``CodeExample`` from a fence, keeping its language and code verbatim."""
    return CodeExample(
        language=fence.language, code=fence.code, is_anti_pattern=anti, line_start=fence.line_start
    )


def iter_fences(blocks: tuple[Block, ...] | list[Block]) -> Iterator[Fence]:
    """Every fence in ``blocks``, nested ones included, in source order."""
    for block in blocks:
        if isinstance(block, Fence):
            yield block
        elif isinstance(block, ListBlock):
            for item in block.items:
                yield from iter_fences(item.blocks)
        elif isinstance(block, BlockQuote):
            yield from iter_fences(block.blocks)


def render_blocks(blocks: tuple[Block, ...] | list[Block], indent: str = "") -> str:
    """Render blocks back to compact markdown (fences omitted: they become examples)."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Paragraph):
            out.append(indent + clean_inline(block.text))
        elif isinstance(block, ListBlock):
            for number, item in enumerate(block.items, start=1):
                bullet = f"{number}. " if block.ordered else "- "
                first, rest = item_statement(item)
                line = indent + bullet + first
                nested = render_blocks(rest, indent + "  ")
                out.append(line + ("\n" + nested if nested else ""))
        elif isinstance(block, BlockQuote):
            inner = render_blocks(block.blocks, indent)
            if inner:
                out.append(inner)
        elif isinstance(block, Heading):
            out.append(indent + clean_inline(block.text))
        elif isinstance(block, Other) and block.kind == "table":
            out.append(block.text)
    return "\n".join(o for o in out if o.strip())


def item_statement(item: ListItem) -> tuple[str, tuple[Block, ...]]:
    """A list item's statement (its first paragraph) and the blocks after it."""
    if item.blocks and isinstance(item.blocks[0], Paragraph):
        return clean_inline(item.blocks[0].text), item.blocks[1:]
    return "", item.blocks


def directive_key(path: tuple[str, ...], counters: dict[str, int]) -> str:
    """``slug/of/path#n``: n counts directives already keyed under the same slug.

    Counting per slug (not per raw path) keeps keys unique when two headings differ only in
    case or punctuation.
    """
    slug = "/".join(filter(None, (slugify(p) for p in path))) or "root"
    counters[slug] = counters.get(slug, 0) + 1
    return f"{slug}#{counters[slug]}"


@dataclass
class DocContext:
    """Everything the format parsers share about one document being parsed."""

    path: str
    lines: list[str]
    segments: list[Segment]
    front_matter: FrontMatter | None
    content_hash: str
