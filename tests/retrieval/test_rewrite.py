from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.retrieval.fts import build_match
from memory_core.retrieval.rewrite import rewrite_query, sanitised_literal
from memory_core.storage.sqlite.driver import select_driver


def test_stopwords_are_dropped_and_terms_kept_in_order() -> None:
    query = rewrite_query("How do we handle the retries of uploads?")
    assert query.terms == ("handle", "retries", "uploads")
    assert "how" in query.dropped
    assert query.and_match == '"handle" AND "retries" AND "uploads"'
    assert query.or_match == '"handle" OR "retries" OR "uploads"'


def test_only_stopwords_are_kept_rather_than_searching_nothing() -> None:
    assert rewrite_query("to be or not to be").terms == ("to", "be", "or", "not")


def test_terms_are_capped() -> None:
    query = rewrite_query(" ".join(f"word{i}" for i in range(40)), max_terms=5)
    assert len(query.terms) == 5
    assert "word5" in query.dropped


def test_fts_operators_and_quotes_become_plain_terms() -> None:
    query = rewrite_query('"deploy" AND NOT (rollback) NEAR/3 col:x* ^start')
    assert query.terms == ("deploy", "rollback", "near", "3", "col", "x", "start")
    assert query.and_match is not None and '""' not in query.and_match


def test_sanitised_literal_replaces_non_word_characters() -> None:
    assert sanitised_literal('a"b(c)-d:e') == "a b c d e"


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_a_valid_fts5_query(text: str) -> None:
    conn = select_driver().connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    conn.execute("INSERT INTO t VALUES ('some text to match')")
    rewritten = rewrite_query(text)
    for match in (rewritten.and_match, rewritten.or_match, build_match(text)):
        if match is not None:
            conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (match,)).fetchone()
    conn.close()
