"""Collect a document's metadata from front matter, its preamble and a Metadata section.

Template documents declare Layer, AuthoritativeFor, Topics and Severity (seed 003, Req. 8.1)
in any of these forms, keys case-insensitive:

- YAML front matter (``layer: 2-Application``, lists as ``[a, b]`` or ``- a`` lines);
- ``**Layer:** 2-Application`` lines between the title and the first ``##`` heading;
- ``- Layer: 2-Application`` bullets there (a bullet with no value may hold a nested list);
- the same lines or bullets under a ``## Metadata`` heading.

The first occurrence of a key wins; repeats are reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rules_parser.blocks import Block, ListBlock, Paragraph
from rules_parser.frontmatter import FrontMatter
from rules_parser.structure import (
    Segment,
    clean_inline,
    item_statement,
    metadata_key,
    parse_key_value,
    split_list_value,
)

__all__ = ["MetaValue", "Metadata", "collect_metadata", "is_metadata_heading"]


@dataclass(frozen=True, slots=True)
class MetaValue:
    """One metadata value as written: a string or a list, with where it was written."""

    raw_key: str
    value: str | list[str] | bool | None
    line: int
    column: int | None

    def as_list(self) -> list[str]:
        """The value as a list of strings (comma-separated strings are split)."""
        if isinstance(self.value, list):
            return [i for v in self.value for i in split_list_value(str(v))]
        if isinstance(self.value, bool) or self.value is None:
            return []
        return split_list_value(self.value)

    def as_text(self) -> str:
        """The value as one string (lists joined with ``, ``)."""
        if isinstance(self.value, list):
            return ", ".join(str(v) for v in self.value)
        if self.value is None:
            return ""
        return str(self.value).strip().strip("`\"'").strip()


@dataclass
class Metadata:
    values: dict[str, MetaValue] = field(default_factory=dict)
    duplicates: list[tuple[str, MetaValue]] = field(default_factory=list)
    # Metadata lines belong to no directive; the parsers skip these lines.
    lines: set[int] = field(default_factory=set)

    def add(self, key: str, value: MetaValue) -> None:
        if key in self.values:
            self.duplicates.append((key, value))
        else:
            self.values[key] = value
        self.lines.add(value.line)


def is_metadata_heading(title: str) -> bool:
    """True for ``## Metadata``-style headings."""
    return title.strip().lower().rstrip(":") in ("metadata", "meta", "rule metadata", "properties")


def _column(source_lines: list[str], line: int, value: str) -> int | None:
    if not value or not 0 < line <= len(source_lines):
        return None
    found = source_lines[line - 1].find(value)
    return found + 1 if found >= 0 else None


def _from_blocks(blocks: list[Block], meta: Metadata, source_lines: list[str]) -> None:
    for block in blocks:
        if isinstance(block, Paragraph):
            for offset, line in enumerate(block.text.split("\n")):
                lineno = block.line_start + offset
                kv = parse_key_value(line, lineno)
                if kv is not None:
                    column = _column(source_lines, lineno, kv.value)
                    meta.add(kv.key, MetaValue(kv.raw_key, kv.value, lineno, column))
        elif isinstance(block, ListBlock):
            for item in block.items:
                statement, rest = item_statement(item)
                kv = parse_key_value(statement, item.line_start)
                if kv is None:
                    continue
                value: str | list[str] = kv.value
                if not kv.value:
                    nested = [b for b in rest if isinstance(b, ListBlock)]
                    value = [item_statement(i)[0] for n in nested for i in n.items]
                column = _column(source_lines, item.line_start, kv.value)
                meta.add(kv.key, MetaValue(kv.raw_key, value, item.line_start, column))
                meta.lines.update(range(item.line_start, item.line_end + 1))


def collect_metadata(
    segments: list[Segment], front_matter: FrontMatter | None, source_lines: list[str]
) -> Metadata:
    """Gather metadata from front matter, the preamble and any Metadata section.

    Args:
        segments: the document's segments (see ``structure.segments_of``).
        front_matter: parsed front matter, if the document has one.
        source_lines: the document's lines, for column numbers.

    Returns:
        The metadata found, keyed by canonical key.
    """
    meta = Metadata()
    if front_matter is not None:
        for raw_key, value in front_matter.values.items():
            key = metadata_key(raw_key)
            if key is None:
                continue
            line = front_matter.lines.get(raw_key, 1)
            text = value if isinstance(value, str) else None
            meta.add(key, MetaValue(raw_key, value, line, _column(source_lines, line, text or "")))
    for segment in segments:
        in_preamble = segment.level <= 1
        if in_preamble or is_metadata_heading(segment.title):
            _from_blocks(segment.blocks, meta, source_lines)
    return meta


def text_of(value: MetaValue | None) -> str | None:
    """Convenience: the text of an optional value, None when absent or empty."""
    if value is None:
        return None
    return clean_inline(value.as_text()) or None
