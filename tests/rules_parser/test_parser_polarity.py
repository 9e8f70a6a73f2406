"""Prohibitions stay prohibitions: from wording, headings, labels and ❌, in every format."""

from __future__ import annotations

import re

import pytest
from polarity_corpus import (
    ASK_FIRST,
    FOREIGN_FILES,
    PLAIN_LIST,
    PLAIN_PROHIBITED,
    POSITIVE,
    PROHIBITED,
    TEMPLATE_FILE,
    TEMPLATE_PROHIBITED,
)

from rules_parser import parse
from rules_parser.polarity import directive_marker, heading_polarity, resolve_polarity

# A rendered line reads as a prohibition when its marker says NOT or its text says no.
_NEGATIVE = re.compile(
    r"\bNOT\b|\bnever\b|\bdo not\b|\bdon't\b|\bavoid\b|^(?:MUST|SHOULD|MAY) No\b|❌", re.I
)


def _rendered(severity: str, polarity: str, text: str) -> str:
    return f"{directive_marker(severity, polarity, text)} {text}"


@pytest.mark.parametrize("path", sorted(FOREIGN_FILES))
def test_no_prohibition_renders_as_an_instruction_in_any_format(path: str) -> None:
    document = parse(FOREIGN_FILES[path], path).document
    assert document is not None
    by_text = {d.text: d for d in document.directives}
    for statement in PROHIBITED:
        directive = by_text[statement]
        assert directive.polarity == "dont", (path, statement)
        assert _NEGATIVE.search(
            _rendered(directive.severity, directive.polarity, directive.text)
        ), (path, statement)
    for statement in ASK_FIRST:
        directive = by_text[statement]
        assert directive.polarity == "ask", (path, statement)
        assert directive_marker(directive.severity, "ask", statement) == "ASK FIRST"
    for statement in POSITIVE:
        directive = next(d for d in document.directives if d.text.endswith(statement[1:]))
        assert directive.polarity == "do", (path, statement)


def test_a_plain_bullet_list_keeps_prohibitions_from_wording_alone() -> None:
    document = parse(PLAIN_LIST, "notes.md").document
    assert document is not None and document.format == "plain_markdown"
    by_text = {d.text: d for d in document.directives}
    for statement in PLAIN_PROHIBITED:
        directive = by_text[statement]
        assert directive.polarity == "dont", statement
        assert _NEGATIVE.search(_rendered(directive.severity, "dont", statement)), statement
    assert by_text["Ask first before adding a new dependency"].polarity == "ask"
    assert by_text["Always run the tests before committing"].polarity == "do"


def test_template_prohibitions_keep_their_polarity() -> None:
    document = parse(TEMPLATE_FILE, "rules/boundaries.md").document
    assert document is not None and document.format == "template"
    by_text = {d.text: d for d in document.directives}
    for statement in TEMPLATE_PROHIBITED:
        directive = by_text[statement]
        assert directive.polarity == "dont", statement
        assert _NEGATIVE.search(_rendered(directive.severity, "dont", statement))
    assert by_text["Run the tests before committing"].polarity == "do"
    assert by_text["Ask first before adding a new dependency"].polarity == "ask"


def test_a_heading_prohibition_makes_a_plain_statement_must_not() -> None:
    document = parse("# Guide\n\n## Never do\n- Use `as any` type casting\n", "AGENTS.md")
    assert document.document is not None
    directive = document.document.directives[0]
    assert (directive.severity, directive.polarity) == ("MUST", "dont")
    assert _rendered(directive.severity, directive.polarity, directive.text) == (
        "MUST NOT Use `as any` type casting"
    )


def test_a_statement_heading_does_not_negate_the_instructions_under_it() -> None:
    text = "# Guide\n\n## Avoid global mutation\n- Use immutable updates\n- shared module state\n"
    document = parse(text, "AGENTS.md").document
    assert document is not None
    polarity = {d.text: d.polarity for d in document.directives}
    assert polarity == {"Use immutable updates": "do", "shared module state": "dont"}


def test_dont_repeat_yourself_is_a_principle_not_a_prohibition() -> None:
    assert heading_polarity("Don't Repeat Yourself") is None
    assert resolve_polarity("Extract shared helpers", ["Don't Repeat Yourself"]) == ("do", None)


def test_self_negating_text_keeps_the_plain_severity_marker() -> None:
    assert directive_marker("MUST", "dont", "Never log tokens") == "MUST"
    assert directive_marker("SHOULD", "dont", "Use `any`") == "SHOULD NOT"
    assert directive_marker("MUST", "do", "Use strict mode") == "MUST"
