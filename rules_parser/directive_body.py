"""Read a directive's body: description, rationale, examples, anti-patterns, overrides.

A body is the blocks under a directive heading (or a bullet's nested blocks). Labels start a
part, written as a bold or plain ``Label:`` at the start of a paragraph or as a deeper
sub-heading; what follows belongs to that label until the next one:

- ``Rationale:`` / ``Why:`` -> rationale (following paragraphs too);
- ``Example:`` / ``Good:`` / ``Correct:`` / ``Do:`` -> following code blocks are examples;
- ``Anti-pattern:`` / ``Bad:`` / ``Incorrect:`` / ``Don't:`` / ``Avoid:`` -> its text and list
  items are anti-patterns, following code blocks are anti-pattern examples;
- ``When to Apply:`` -> directive-level conditions (the text, or the following list);
- ``Topics:`` / ``Layer:`` -> overrides of the document's values.

Unlabelled paragraphs and lists are the directive's detail; unlabelled code blocks are
(positive) examples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rules_parser.blocks import Block, BlockQuote, Fence, Heading, ListBlock, Other, Paragraph
from rules_parser.models import CodeExample
from rules_parser.structure import (
    clean_inline,
    fence_example,
    item_statement,
    iter_fences,
    render_blocks,
    split_list_value,
)

__all__ = ["Body", "label_kind", "read_body"]

_LABELS = {
    "rationale": "rationale",
    "why": "rationale",
    "reason": "rationale",
    "reasoning": "rationale",
    "example": "example",
    "examples": "example",
    "good": "example",
    "good example": "example",
    "correct": "example",
    "do": "example",
    "usage": "example",
    "preferred": "example",
    "anti-pattern": "anti",
    "anti-patterns": "anti",
    "antipattern": "anti",
    "antipatterns": "anti",
    "anti pattern": "anti",
    "bad": "anti",
    "bad example": "anti",
    "incorrect": "anti",
    "don't": "anti",
    "dont": "anti",
    "avoid": "anti",
    "when to apply": "when",
    "applies when": "when",
    "topics": "topics",
    "layer": "layer",
}
_LABEL_RE = re.compile(
    r"^\s*(?:\*\*|__)?\s*(?P<label>[A-Za-z][A-Za-z' \-]{0,20}?)\s*"
    r"(?:(?:\*\*|__)\s*:|:\s*(?:\*\*|__)?)\s*(?P<rest>.*)$",
    re.S,
)


def label_kind(text: str) -> str | None:
    """The part a label names (``rationale``, ``example``, ``anti``, ``when``…), or None."""
    key = text.strip().strip("*_:").strip().lower().replace("’", "'")
    # "Incorrect (imports the whole library)": the reason in brackets is not the label.
    key = re.sub(r"\s*\(.*$", "", key).strip("*_: ")
    key = key.lstrip("❌✅✔✗ ").strip()
    return _LABELS.get(key)


@dataclass
class Body:
    detail: list[str] = field(default_factory=list)
    rationale: list[str] = field(default_factory=list)
    examples: list[CodeExample] = field(default_factory=list)
    anti_patterns: list[str] = field(default_factory=list)
    when_to_apply: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    layer: tuple[str, int] | None = None


def _list_items(block: ListBlock) -> list[str]:
    return [s for s in (item_statement(i)[0] for i in block.items) if s]


def read_body(blocks: list[Block] | tuple[Block, ...]) -> Body:
    """Split a directive's body into its parts (see the module docstring).

    Args:
        blocks: the body blocks in source order; sub-headings act as labels.

    Returns:
        The parts found; lists are empty when a part is absent.
    """
    body = Body()
    label: str | None = None
    for block in blocks:
        if isinstance(block, Heading):
            label = label_kind(block.text)
            if label is None:
                body.detail.append(clean_inline(block.text))
            continue
        if isinstance(block, Paragraph):
            match = _LABEL_RE.match(block.text)
            kind = label_kind(match.group("label")) if match else None
            if match is not None and kind is not None:
                label = kind
                rest = clean_inline(match.group("rest"))
                if not rest:
                    continue
                if kind == "rationale":
                    body.rationale.append(rest)
                elif kind == "anti":
                    body.anti_patterns.append(rest)
                elif kind == "when":
                    body.when_to_apply.extend(split_list_value(rest))
                elif kind == "topics":
                    body.topics.extend(split_list_value(rest))
                    label = None
                elif kind == "layer":
                    body.layer = (rest.strip("`*_ "), block.line_start)
                    label = None
                elif kind == "example":
                    body.detail.append(rest)
                continue
            text = clean_inline(block.text)
            (body.rationale if label == "rationale" else body.detail).append(text)
        elif isinstance(block, Fence):
            body.examples.append(fence_example(block, anti=label == "anti"))
        elif isinstance(block, ListBlock):
            if label == "when":
                body.when_to_apply.extend(_list_items(block))
            elif label == "anti":
                body.anti_patterns.extend(_list_items(block))
            elif label == "topics":
                body.topics.extend(_list_items(block))
            elif label == "rationale":
                body.rationale.append(render_blocks([block]))
            else:
                body.detail.append(render_blocks([block]))
            body.examples.extend(
                fence_example(f, anti=label == "anti") for f in iter_fences([block])
            )
        elif isinstance(block, BlockQuote):
            inner = read_body(block.blocks)
            body.detail.extend(inner.detail)
            body.rationale.extend(inner.rationale)
            body.examples.extend(inner.examples)
            body.anti_patterns.extend(inner.anti_patterns)
        elif isinstance(block, Other) and block.kind == "table":
            body.detail.append(block.text)
    return body
