"""Properties: parse never raises and every line it reports is inside the document."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules_parser import FORMATS, parse

# Fragments that exercise every branch: headings, markers, metadata, lists, fences, front
# matter, labels, tables, quotes, odd whitespace.
FRAGMENTS = [
    "# Rule: T",
    "## Directives",
    "## When to Apply",
    "## Related Rules",
    "## Metadata",
    "### [MUST] Do it",
    "### [SHOULD]",
    "### ",
    "#### Rationale",
    "**Layer:** 2-Application",
    "**Layer:** *",
    "**Layer:** bogus",
    "**Severity:** MAYBE",
    "**Topics:**",
    "**AuthoritativeFor:** a, b",
    "- Layer: 3-Domain",
    "- Topics:",
    "  - nested",
    "    - deeper",
    "- [MUST] never do X",
    "1. Always do Y",
    "- Database:",
    "**Rationale:** because",
    "**Anti-pattern:** no",
    "Bad:",
    "```python",
    "```",
    "~~~",
    "````",
    "    indented code",
    "---",
    "layer: x",
    "globs: *.ts, [a, 'b']",
    "alwaysApply: true",
    "desc: |",
    "> quoted [MUST] rule",
    "| a | b |",
    "|---|---|",
    "<!-- html -->",
    "",
    "   ",
    "\t",
    "password = 'Xk9#mQ2!vLp7'",
    "Setext\n===",
    "\r",
    "\x00",
    "[link](x.md)",
]

documents = st.one_of(
    st.text(max_size=400),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=30)), max_size=40).map(
        "\n".join
    ),
)
paths = st.sampled_from(
    ["rules/x.md", "AGENTS.md", ".cursor/rules/a.mdc", ".roo/rules-code/a.md", ".clinerules", ""]
)


def _line_count(text: str) -> int:
    return len(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=documents, path=paths, forced=st.sampled_from([None, *FORMATS]))
def test_parse_never_raises_and_all_lines_are_in_range(
    text: str, path: str, forced: str | None
) -> None:
    result = parse(text, path, format=forced)  # type: ignore[arg-type]
    total = _line_count(text)
    for issue in result.issues:
        assert 1 <= issue.line <= total, issue
    document = result.document
    if document is None:
        return
    keys = [d.directive_key for d in document.directives]
    assert len(keys) == len(set(keys))
    for directive in document.directives:
        assert 1 <= directive.line_start <= directive.line_end <= total, directive
        assert directive.text
    for section in document.sections:
        assert 1 <= section.line <= total
    for pattern in document.patterns:
        assert pattern.line_start is not None and 1 <= pattern.line_start <= total


@settings(max_examples=100, deadline=None)
@given(text=documents)
def test_parse_is_deterministic(text: str) -> None:
    assert parse(text, "rules/x.md") == parse(text, "rules/x.md")
