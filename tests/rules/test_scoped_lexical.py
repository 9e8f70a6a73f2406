"""The rules lexical arm ranks with the queried scope's BM25 statistics, on SQLite and
PostgreSQL: another scope of the same store (another project on a team server) adding rules
that share the task's words must not change one scope's answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rules_testkit import write_rules
from store_testkit import fresh_pg_database, start_pgserver

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.retrieval.bm25 import bm25_search
from memory_core.rules.service import RulesService
from memory_core.scope import Scope
from memory_core.service import Memoir
from memory_core.storage.ports import LexicalQuery

pytestmark = pytest.mark.anyio

TASK = "Add a login endpoint that hashes passwords and expires idle sessions; validate the body"

_WORDS = ["login", "endpoint", "passwords", "sessions", "validate", "body", "expire", "idle"]
_FILLER = ["cache", "queue", "worker", "report", "metric", "export", "import", "billing"]


def _unrelated_rule(n: int) -> str:
    """A rule of another project whose directives share the task's words, unevenly (so
    they move every term's document frequency and the average length differently)."""
    lines = [
        f"# Rule: Other {n}",
        "",
        "**Layer:** 3-Infrastructure",
        "**Topics:** reporting",
        "**Severity:** SHOULD",
        "",
        "## Directives",
        "",
    ]
    for d in range(6):
        shared = " ".join(_WORDS[(n + d) % len(_WORDS)] for _ in range(1 + d % 3))
        filler = " ".join(_FILLER[(n * d + i) % len(_FILLER)] for i in range(2 + (n + d) % 9))
        lines += [f"### [SHOULD] {filler.capitalize()} {shared} job {n} {d}", "", ""]
    return "\n".join(lines)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memoir.db'}"
    return fresh_pg_database(start_pgserver())


@pytest.fixture
async def opened(store_url: str, project: Path) -> AsyncIterator[Memoir]:
    settings = load_settings(None, cwd=project, environ={})
    memoir = await Memoir.open(store_url, settings=settings, embedder=create_embedder("hash:384"))
    await memoir.embedder.ensure_loaded()
    try:
        yield memoir
    finally:
        await memoir.close()


async def _answer(memoir: Memoir, project: Path) -> list[tuple[str, str, float]]:
    # A fresh service each time: nothing cached from an earlier answer can hide a change.
    service = RulesService(memoir.context, cwd=project)
    try:
        result = await service.query_directives(TASK, scope="a", max_items=50, token_budget=5000)
    finally:
        await service.close()
    return [(d.directive_id, d.text, d.score) for d in result.directives]


async def test_another_scope_sharing_the_words_leaves_the_answer_unchanged(
    opened: Memoir, project: Path
) -> None:
    service = RulesService(opened.context, cwd=project)
    try:
        await service.upsert_markdown([str(project / "rules")], scope="a")
        before = await _answer(opened, project)
        other = project / "other-project-rules"
        write_rules(other, {f"other-{n}.md": _unrelated_rule(n) for n in range(40)})
        report = await service.upsert_markdown([str(other)], scope="b")
        assert report.documents_failed == 0
    finally:
        await service.close()
    after = await _answer(opened, project)
    assert len(before) >= 5
    assert after == before


async def test_scoped_bm25_is_the_backends_bm25_when_the_store_holds_one_scope(
    opened: Memoir, project: Path
) -> None:
    # With one scope and one kind, the scope's statistics are the whole index's: the scores
    # from the scope's postings and lengths equal the backend's own BM25.
    service = RulesService(opened.context, cwd=project)
    try:
        await service.upsert_markdown([str(project / "rules")], scope="a")
    finally:
        await service.close()
    scope = Scope.of("a")
    queries = [
        LexicalQuery(("sessions", "passwords", "validate", "schema"), "OR"),
        LexicalQuery(("hash", "passwords"), "AND"),
        LexicalQuery(("every", "request", "body"), "OR"),
    ]

    def both(tx: Any) -> list[tuple[list[Any], list[Any]]]:
        lengths = tx.lexical.lengths(scope)
        pairs = []
        for query in queries:
            postings = tx.lexical.term_frequencies(query.terms, scope)
            ours = bm25_search(query, postings, lengths, limit=50)
            theirs = tx.lexical.search(query, scope, limit=50)
            pairs.append((ours, theirs))
        return pairs

    pairs = await opened.store.read(both)
    assert any(theirs for _, theirs in pairs)
    for ours, theirs in pairs:
        assert [h.item_id for h in ours] == [h.item_id for h in theirs]
        for a, b in zip(ours, theirs, strict=True):
            assert a.score == pytest.approx(b.score, rel=1e-9, abs=1e-12)
