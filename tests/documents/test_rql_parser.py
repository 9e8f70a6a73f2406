from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.documents.fel import parse_filter
from memory_core.documents.rql import parse_rql
from memory_core.errors import QuerySyntaxError
from memory_core.filters import And, Compare, InList, Not, Or

SPEC_EXAMPLES = [
    """SELECT doc.id, doc.path, score FROM doc
USING semantic("recovery runbook")
FILTER doc.tag = "ops" AND doc.mtime >= "2026-01-01"
LIMIT 10;""",
    """SELECT chunk.text, chunk.doc_id, score FROM chunk
USING semantic("rate limit") , lexical("429")
FILTER doc.path GLOB "**/api/**" AND chunk.tokens <= 256
ORDER BY score DESC
LIMIT 8;""",
    """SELECT doc.id, doc.path FROM doc
FILTER doc.tag IN ("policy", "security")
ORDER BY doc.mtime DESC
LIMIT 20;""",
    "SELECT chunk.text, score FROM chunk USING semantic('S3 auth') FILTER doc.tag = 'docs' LIMIT 5;",
]


@pytest.mark.parametrize("text", SPEC_EXAMPLES)
def test_every_spec_example_parses(text: str) -> None:
    query = parse_rql(text)
    assert query.table in ("doc", "chunk")
    assert query.limit is not None


def test_statement_parts_are_captured() -> None:
    query = parse_rql(SPEC_EXAMPLES[1])
    assert query.fields == ("chunk.text", "chunk.doc_id", "score")
    assert (query.semantic, query.lexical) == ("rate limit", "429")
    assert query.order_by == "score" and query.descending
    assert query.limit == 8 and query.offset == 0
    assert query.filter == And(
        (Compare("resource.uri", "GLOB", "**/api/**"), Compare("item.token_count", "<=", 256))
    )


def test_keywords_are_case_insensitive_and_select_fields_may_be_unqualified() -> None:
    query = parse_rql("select text, bogus, score from chunk using lexical('x') limit 3 offset 6")
    assert query.fields == ("chunk.text", "score")
    assert query.ignored_fields == ("bogus",)
    assert query.offset == 6


def test_and_binds_tighter_than_or_and_not_applies_to_a_term() -> None:
    expr = parse_filter("doc.tag = 'a' OR doc.tag = 'b' AND NOT chunk.tokens > 5")
    assert expr == Or(
        (
            Compare("resource.tags", "=", "a"),
            And((Compare("resource.tags", "=", "b"), Not(Compare("item.token_count", ">", 5)))),
        )
    )
    assert parse_filter("doc.tag NOT IN ('x')") == InList("resource.tags", ("x",), negated=True)


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("tag = 'x'", 1, 1, "qualified"),
        ("doc.size > 3", 1, 1, "unknown field"),
        ("doc.tag = ", 1, 11, "expected a value"),
        ("chunk.tokens = 'many'", 1, 16, "is a number"),
        ("doc.path = 12", 1, 12, "is text"),
        ("doc.tag = 'x' AND", 1, 18, "expected a field"),
        ("(doc.tag = 'x'", 1, 15, "expected ')'"),
        ("doc.tag = 'unterminated", 1, 11, "unterminated"),
        ("doc.tag ~ 'x'", 1, 9, "unexpected character"),
        ("doc.tag = 'x'\n  OR doc.path ==", 2, 16, "expected a value"),
    ],
)
def test_filter_errors_point_at_line_and_column(
    text: str, line: int, column: int, fragment: str
) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse_filter(text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert fragment in caught.value.message
    assert caught.value.details["expected"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("SELECT FROM chunk", "field to select"),
        ("SELECT text FROM table", "expected a table"),
        ("SELECT text FROM chunk USING fuzzy('x')", "search function"),
        ("SELECT text FROM chunk USING semantic(x)", "search text"),
        ("SELECT text FROM chunk USING semantic('  ')", "empty"),
        ("SELECT text FROM chunk LIMIT 0", "out of range"),
        ("SELECT text FROM chunk LIMIT 99999999", "out of range"),
        ("SELECT text FROM chunk LIMIT 5 OFFSET -1", "out of range"),
        ("SELECT text FROM chunk LIMIT 2.5", "whole number"),
        ("SELECT text FROM chunk FILTER text = 'x'", "qualified"),
        ("SELECT text FROM chunk ORDER BY doc.tag", "doc.tag"),
        ("SELECT text FROM chunk; DROP TABLE item", "unexpected text"),
    ],
)
def test_statement_errors(text: str, fragment: str) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse_rql(text)
    assert fragment in caught.value.message


def _check_position(error: QuerySyntaxError, text: str) -> None:
    lines = text.split("\n")
    assert 1 <= error.line <= len(lines)
    assert 1 <= error.column <= len(lines[error.line - 1]) + 1


rql_alphabet = st.sampled_from(
    [
        "SELECT",
        "FROM",
        "chunk",
        "doc",
        "USING",
        "semantic(",
        "lexical(",
        ")",
        "FILTER",
        "AND",
        "OR",
        "NOT",
        "IN",
        "(",
        ",",
        "doc.tag",
        "chunk.tokens",
        "=",
        "<=",
        "!=",
        "LIKE",
        "GLOB",
        "'x'",
        '"y"',
        "42",
        "ORDER BY",
        "score",
        "LIMIT",
        "OFFSET",
        ";",
        "\n",
        "'",
        "doc.path",
        "*",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(rql_alphabet, max_size=25).map(" ".join))
def test_rql_parser_never_crashes_and_errors_are_in_range(text: str) -> None:
    try:
        parse_rql(text)
    except QuerySyntaxError as error:
        _check_position(error, text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_filter_parser_never_crashes_on_any_text(text: str) -> None:
    try:
        parse_filter(text)
    except QuerySyntaxError as error:
        _check_position(error, text)
