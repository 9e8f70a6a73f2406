"""Candidate search: the lexical arm's MATCH plan, the fast FTS path, condition postings."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.rules.candidates import lexical_queries, rule_condition_scores
from memory_core.rules.index import build_index
from memory_core.rules.persistence import RuleRow
from memory_core.rules.scoring import content_stems, when_to_apply_match
from memory_core.rules.service import RulesService
from memory_core.scope import Scope
from memory_core.storage.ports import LexicalQuery

pytestmark = pytest.mark.anyio


def test_absent_terms_are_dropped_and_and_comes_first() -> None:
    rows = {"login": 3, "endpoint": 10, "task": 0, "user": 40}
    queries = lexical_queries(["login", "task", "endpoint", "user"], rows, max_rows=1000)
    # "task" is in no row: it would empty the AND and adds nothing to the OR.
    assert queries == [
        LexicalQuery(("login", "endpoint", "user"), "AND"),
        LexicalQuery(("login", "endpoint", "user"), "OR"),
    ]


def test_the_or_pass_keeps_the_rarest_terms_within_the_row_cap() -> None:
    rows = {"secure": 37_000, "messages": 14_000, "property": 8_000, "error": 47_000}
    queries = lexical_queries(["secure", "error", "messages", "property"], rows, max_rows=25_000)
    assert queries == [
        LexicalQuery(("property", "messages", "secure", "error"), "AND"),
        LexicalQuery(("property", "messages"), "OR"),
    ]


def test_terms_too_common_for_an_or_pass_leave_only_the_and() -> None:
    rows = {"error": 47_000, "tests": 42_000}
    assert lexical_queries(["error", "tests"], rows, max_rows=20_000) == [
        LexicalQuery(("tests", "error"), "AND")
    ]
    assert lexical_queries(["error"], rows, max_rows=20_000) == []


def test_one_term_and_no_terms() -> None:
    assert lexical_queries(["login"], {"login": 2}, max_rows=10) == [LexicalQuery(("login",), "OR")]
    assert lexical_queries(["nothing"], {"nothing": 0}, max_rows=10) == []
    assert lexical_queries([], {}, max_rows=10) == []


@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=4), st.integers(0, 50_000), max_size=8
    ),
    st.integers(1, 60_000),
)
def test_or_pass_never_exceeds_the_cap(rows: dict[str, int], cap: int) -> None:
    queries = lexical_queries(list(rows), rows, max_rows=cap)
    for query in queries:
        if query.operator == "AND":
            continue
        assert sum(rows[t] for t in query.terms) <= cap
        assert all(rows[t] > 0 for t in query.terms)


async def test_crowded_scopes_do_not_starve_the_lexical_arm(
    loaded: RulesService, project: Path
) -> None:
    # Other scopes hold the same rules; rows that tie on bm25 come in item-id order, so for
    # the scope written last they crowd the over-fetched FTS rows. The arm's search must
    # still find that scope's directives, in the same order as in the first scope.
    for scope in ("crowd-1", "crowd-2", "crowd-3", "crowd-4"):
        await loaded.upsert_markdown([str(project / "rules")], scope=scope)
    queries = [
        LexicalQuery(("sessions",), "OR"),
        LexicalQuery(("login", "endpoint"), "OR"),
        LexicalQuery(("hash", "passwords"), "AND"),
        LexicalQuery(("never",), "OR"),
    ]

    def found(tx: Any, scope: str, query: LexicalQuery, limit: int) -> list[tuple[str, int]]:
        hits = tx.lexical.search(query, Scope.of(scope), kinds=("directive",), limit=limit)
        items = tx.items.get([h.item_id for h in hits])
        return [(items[h.item_id].text, items[h.item_id].start_line) for h in hits]

    def both(tx: Any) -> list[tuple[Any, Any]]:
        return [
            (found(tx, "s", query, limit), found(tx, "crowd-4", query, limit))
            for query, limit in itertools.product(queries, (1, 2, 30))
        ]

    pairs = await loaded._ctx.store.read(both)
    assert any(first for first, _ in pairs)
    for first, crowded in pairs:
        assert first == crowded


async def test_row_counts_are_per_term(loaded: RulesService) -> None:
    counts = await loaded._ctx.store.read(
        lambda tx: tx.lexical.term_rows(["passwords", "zzzunknown", "sessions"])
    )
    assert counts["passwords"] >= 1 and counts["zzzunknown"] == 0 and counts["sessions"] >= 1


_WORDS = ["adding", "changing", "login", "session", "token", "migration", "schema", "new", "api"]


@given(
    st.lists(
        st.lists(
            st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join),
            max_size=3,
        ),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.sampled_from(_WORDS), max_size=5).map(" ".join),
)
def test_condition_postings_score_like_matching_each_rule(
    rules: list[list[str]], task: str
) -> None:
    rows = [
        RuleRow(f"r{n}", f"r{n}", {"when_to_apply": conditions})
        for n, conditions in enumerate(rules)
    ]
    index = build_index(1, [], rows)
    stems = content_stems(task)
    expected = {
        rule_id: score
        for rule_id, rule in index.rules.items()
        if (score := when_to_apply_match(rule.condition_terms, stems)[0]) > 0
    }
    assert rule_condition_scores(index, stems) == expected


async def test_a_lexical_page_probes_only_the_rows_it_needs(
    loaded: RulesService, project: Path
) -> None:
    from memory_core.storage.sqlite.lexical import SqliteLexical

    # Another scope's copy of the same rules: rows of "s" and "other" share the FTS table.
    await loaded.upsert_markdown([str(project / "rules")], scope="other")
    query = LexicalQuery(("the", "a", "to", "and"), "OR")

    def search(conn: Any, scope: str, limit: int) -> tuple[list[Any], list[int]]:
        probed: list[int] = []

        def trace(statement: str) -> None:
            if statement.startswith("SELECT item.item_id FROM item"):
                probed.append(statement.count(","))  # ids in the IN list, minus one

        conn.set_trace_callback(trace)
        try:
            hits = SqliteLexical(conn).search(
                query, Scope.of(scope), kinds=("directive",), limit=limit
            )
        finally:
            conn.set_trace_callback(None)
        return hits, [n + 1 for n in probed]

    db = loaded._ctx.store.db
    every, _ = await db.read(lambda conn: search(conn, "s", 1000))
    assert len(every) >= 4
    # Rows of "other" rank among those of "s" (same texts), so some probes come up short;
    # whichever way the page falls, the answer is the top of the full ranking ...
    for limit in (1, 2, 3):
        hits, probed = await db.read(lambda conn, limit=limit: search(conn, "s", limit))
        assert hits == every[:limit]
        # ... and the first probe asks about ``limit`` rows, not the whole over-fetched page.
        assert probed[0] == limit
