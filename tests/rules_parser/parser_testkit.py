"""Shared paths and small builders for the rules_parser tests."""

from __future__ import annotations

from pathlib import Path

from rules_parser import ParseResult, ValidationIssue

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_rules"
FOREIGN = SAMPLES / "foreign"
GOLDEN = Path(__file__).resolve().parent / "golden"


def issues_for(result: ParseResult, field: str) -> list[ValidationIssue]:
    return [i for i in result.issues if i.field == field]


def template(body: str, *, meta: str | None = None) -> str:
    """A template document: title, metadata (default: all four valid fields), body."""
    if meta is None:
        meta = (
            "**Layer:** 2-Application\n"
            "**AuthoritativeFor:** validation\n"
            "**Topics:** api, security\n"
            "**Severity:** MUST\n"
        )
    return f"# Rule: Test Rule\n\n{meta}\n{body}"
