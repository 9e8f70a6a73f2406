"""Retrieval (spec "Retrieval Policy"): hybrid + RRF, entries without embeddings, the vector
index unavailable, tri-score with tunable weights and tau, MMR, the budget, context assembly,
score persistence and a reproducible ``now``."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from memory_testkit import SPACE

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.errors import DatabaseUnavailableError
from memory_core.memories.ranking import TriScore, weigh
from memory_core.memories.service import MemoryService
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _days_ago(days: float) -> str:
    return (NOW - timedelta(days=days)).isoformat()


def _service(memoir: Memoir, **memories: Any) -> MemoryService:
    settings = memoir.settings.model_copy(
        update={"memories": memoir.settings.memories.model_copy(update=memories)}
    )
    return MemoryService(replace(memoir.context, settings=settings))


class _VectorsDown:
    """The real transaction with its vector index failing (the fault, not a mock of the DB)."""

    def __init__(self, tx: Any) -> None:
        self._tx = tx

    def __getattr__(self, name: str) -> Any:
        if name == "vectors":
            raise DatabaseUnavailableError("vector index unavailable")
        return getattr(self._tx, name)


class VectorlessStore:
    """A real store whose vector side is down: every vector call raises."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def read(self, fn: Any) -> Any:
        return await self._inner.read(lambda tx: fn(_VectorsDown(tx)))

    async def vector_search(self, *args: Any, **kwargs: Any) -> Any:
        raise DatabaseUnavailableError("vector index unavailable")

    async def similarities(self, *args: Any, **kwargs: Any) -> Any:
        raise DatabaseUnavailableError("vector index unavailable")


async def test_entries_without_embeddings_are_found_by_the_sparse_arm(memoir: Memoir) -> None:
    saved = await memoir.memories.remember(
        "Releases ship on Tuesdays after QA sign-off", space=SPACE, embed_now=False
    )
    assert saved.memory is not None and saved.memory.needs_embedding
    found = await memoir.memories.recall("when do releases ship", space=SPACE, now=NOW)
    assert [r.id for r in found.results] == [saved.memory.id]
    assert found.results[0].scores.relevance == pytest.approx(1.0)  # normalised sparse score


async def test_recall_works_with_the_vector_index_unavailable(memoir: Memoir) -> None:
    for text in ("Releases ship on Tuesdays", "The cache TTL is 300 seconds", "Use pnpm, not npm"):
        await memoir.memories.remember(text, space=SPACE)
    broken = MemoryService(replace(memoir.context, store=VectorlessStore(memoir.store)))
    found = await broken.recall("cache TTL", space=SPACE, now=NOW)
    assert found.results and found.results[0].text == "The cache TTL is 300 seconds"
    assert any("vector search unavailable" in w for w in found.warnings)


async def test_hybrid_recall_uses_both_arms_fused_by_rrf(memoir: Memoir) -> None:
    await memoir.memories.remember("Releases ship on Tuesdays", space=SPACE)
    found = await memoir.memories.recall("releases", space=SPACE, now=NOW, explain=True)
    assert found.explain is not None
    assert found.explain["lexical"] and found.explain["semantic"]
    assert found.explain["parameters"]["rrf_k"] == 60
    assert found.explain["parameters"]["relevance_gate"] == 0.8


async def test_recency_decays_with_tau_of_seven_days(memoir: Memoir) -> None:
    await memoir.memories.remember(
        "Deploy freeze starts Friday", space=SPACE, created_at=_days_ago(7), now=NOW
    )
    found = await memoir.memories.recall("deploy freeze", space=SPACE, now=NOW)
    assert found.results[0].scores.recency == pytest.approx(math.exp(-1), rel=1e-4)


async def test_the_weights_decide_between_recent_and_important(memoir: Memoir) -> None:
    # Both about equally relevant (within the relevance gate): the weights decide.
    old = await memoir.memories.remember(
        "Remember: deploy key in vault",
        space=SPACE,
        created_at=_days_ago(60),
        now=NOW,
    )
    new = await memoir.memories.remember(
        "deploy key rotated yesterday", space=SPACE, created_at=_days_ago(0), now=NOW
    )
    assert old.memory is not None and new.memory is not None
    by_recency = await _service(memoir, beta=3.0, gamma=0.0).recall(
        "deploy key", space=SPACE, now=NOW
    )
    by_importance = await _service(memoir, beta=0.0, gamma=3.0).recall(
        "deploy key", space=SPACE, now=NOW
    )
    assert by_recency.results[0].id == new.memory.id
    assert by_importance.results[0].id == old.memory.id


async def test_the_same_now_gives_the_same_ranking(memoir: Memoir) -> None:
    for days, text in ((1, "pnpm is the package manager"), (9, "npm was the package manager")):
        await memoir.memories.remember(text, space=SPACE, created_at=_days_ago(days), now=NOW)
    first = await memoir.memories.recall("package manager", space=SPACE, now=NOW)
    second = await memoir.memories.recall("package manager", space=SPACE, now=NOW)
    assert [(r.id, r.scores) for r in first.results] == [(r.id, r.scores) for r in second.results]


async def test_mmr_with_a_low_lambda_prefers_a_different_topic_over_a_near_repeat(
    memoir: Memoir,
) -> None:
    await memoir.memories.remember("The staging database is Postgres", space=SPACE, tags=["db"])
    await memoir.memories.remember(
        "The staging database Postgres holds the orders schema", space=SPACE, tags=["db"]
    )
    other = await memoir.memories.remember(
        "The staging cache is Redis", space=SPACE, tags=["cache"]
    )
    assert other.memory is not None
    query = "staging database postgres"
    relevant_only = await _service(memoir, mmr_lambda=1.0).recall(query, space=SPACE, now=NOW, k=2)
    diverse = await _service(memoir, mmr_lambda=0.2).recall(query, space=SPACE, now=NOW, k=2)
    assert other.memory.id not in [r.id for r in relevant_only.results]
    assert other.memory.id in [r.id for r in diverse.results]


async def test_without_embeddings_mmr_falls_back_to_tag_overlap(memoir: Memoir) -> None:
    for text, tag in (
        ("alpha service uses the shared queue", "queue"),
        ("alpha service uses the shared queue for jobs", "queue"),
        ("alpha service uses the shared cache", "cache"),
    ):
        await memoir.memories.remember(text, space=SPACE, tags=[tag], embed_now=False)
    found = await _service(memoir, mmr_lambda=0.3).recall(
        "alpha service shared", space=SPACE, now=NOW, k=2
    )
    assert {r.tags[0] for r in found.results} == {"queue", "cache"}


async def test_the_token_budget_is_never_exceeded(memoir: Memoir) -> None:
    teams = ["billing", "search", "checkout", "identity", "payments", "growth", "infra", "mobile",
             "web", "data", "security", "support", "docs", "design", "qa", "release", "ops",
             "sales", "legal", "finance"]  # fmt: skip
    for i, team in enumerate(teams):
        await memoir.memories.remember(
            f"The {team} team owns orders pipeline stage {team}-{i * 7} and its alerts",
            space=SPACE, embed_now=False, source_ids=[f"chat:{i}"], on_conflict="keep",
        )  # fmt: skip
    for budget in (1, 7, 40, 120, 600):
        found = await memoir.memories.recall(
            "orders pipeline", space=SPACE, budget_tokens=budget, k=16
        )
        assert found.used_tokens <= budget
        assert memoir.tokens.count(found.context) <= budget
        assert len(found.results) <= 16
    wide = await memoir.memories.recall("orders pipeline", space=SPACE, budget_tokens=5000, k=16)
    assert len(wide.results) == 16


async def test_the_context_groups_by_tag_and_carries_source_ids_and_summaries(
    memoir: Memoir,
) -> None:
    long_text = " ".join(
        f"Sentence {i} explains how the billing export batches invoices per tenant."
        for i in range(20)
    )
    await memoir.memories.remember(long_text, space=SPACE, tags=["billing"], source_ids=["doc:77"])
    await memoir.memories.remember("Billing runs nightly at 2am", space=SPACE, tags=["billing"])
    await memoir.memories.remember("Billing alerts go to #payments", space=SPACE, tags=["alerts"])
    found = await memoir.memories.recall("billing", space=SPACE, budget_tokens=2000)
    assert "## billing" in found.context and "## alerts" in found.context
    billing = (
        found.context.split("## alerts")[0]
        if found.context.index("## billing") == 0
        else found.context
    )
    assert billing.count("- ") >= 2
    assert "sources: doc:77" in found.context
    long_hit = next(r for r in found.results if r.source_ids == ["doc:77"])
    assert long_hit.summary_used
    assert long_text not in found.context  # the summary, not the raw text


async def test_recall_persists_last_scores_of_the_ranked_entries(memoir: Memoir) -> None:
    saved = await memoir.memories.remember("Use ruff for linting", space=SPACE)
    assert saved.memory is not None
    found = await memoir.memories.recall("linting", space=SPACE, now=NOW)
    shown = await memoir.memories.show(saved.memory.id, space=SPACE)
    assert shown.last_scores is not None
    assert shown.last_scores["computed_at"] == NOW.isoformat(timespec="microseconds")
    assert shown.last_scores["total"] == pytest.approx(found.results[0].scores.total, abs=1e-6)
    assert set(shown.last_scores) == {"relevance", "recency", "importance", "total", "computed_at"}


async def test_an_empty_query_is_refused(memoir: Memoir, tmp_path: Path) -> None:
    from memory_core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="empty"):
        await memoir.memories.recall("  ", space=SPACE)


def test_the_relevance_gate_keeps_an_irrelevant_entry_below_a_relevant_one() -> None:
    """The regression the MemoryBank evaluation found: with the spec's plain sum, an entry of
    relevance 0.00 (important, recent) ranked above one of relevance 0.70 (old, ordinary)."""
    irrelevant = TriScore(relevance=0.0, recency=1.0, importance=1.0, total=0.0)
    relevant = TriScore(relevance=0.7, recency=0.01, importance=0.3, total=0.0)
    middling = TriScore(relevance=0.4, recency=0.5, importance=0.5, total=0.0)
    plain = weigh([irrelevant, relevant, middling], alpha=1, beta=1, gamma=1)
    assert plain[0].total > plain[1].total  # what the gate is for
    gated = weigh([irrelevant, relevant, middling], alpha=1, beta=1, gamma=1, relevance_gate=0.5)
    assert gated[1].total > gated[0].total
    assert gated[2].total > gated[0].total  # relevant enough: recency and importance count


def test_below_the_gate_no_weight_of_recency_or_importance_lifts_an_entry() -> None:
    rng = random.Random(7)
    for _ in range(500):
        scores = [
            TriScore(rng.random(), rng.random(), rng.random(), 0.0)
            for _ in range(rng.randint(2, 9))
        ]
        gate = rng.choice((0.3, 0.5, 0.8))
        weights = {
            "alpha": rng.uniform(0.1, 3),
            "beta": rng.uniform(0, 5),
            "gamma": rng.uniform(0, 5),
        }
        for normalise in (True, False):
            out = weigh(scores, normalise=normalise, relevance_gate=gate, **weights)
            floor = gate * max(s.relevance for s in scores)
            passed = [s.total for s in out if s.relevance >= floor]
            failed = [s.total for s in out if s.relevance < floor]
            if passed and failed:
                assert min(passed) > max(failed) or math.isclose(min(passed), max(failed))


async def test_an_important_recent_entry_off_the_topic_does_not_outrank_the_answer(
    memoir: Memoir,
) -> None:
    answer = await memoir.memories.remember(
        "The nightly invoice export runs at 2am UTC", space=SPACE, created_at=_days_ago(40), now=NOW
    )
    noise = await memoir.memories.remember(
        "Remember: always greet Dana warmly on Mondays", space=SPACE, pin=True, now=NOW
    )
    assert answer.memory is not None and noise.memory is not None
    found = await memoir.memories.recall("when does the invoice export run", space=SPACE, now=NOW)
    ranked = [r.id for r in found.results]
    assert ranked[0] == answer.memory.id
    spec_sum = await _service(memoir, relevance_gate=0.0).recall(
        "when does the invoice export run", space=SPACE, now=NOW
    )
    assert spec_sum.results[0].id == noise.memory.id  # the plain sum lets importance win


# An exact match saved a minute before a burst of near misses (each inside the relevance
# gate: cosine 0.84-0.89 with the hashing embedder; no two near-duplicates, no conflicts).
_EXACT = (
    "the release notes for the payments service are drafted in the shared wiki page by the "
    "platform team"
)
_TEAMS = (
    "billing", "ledger", "checkout", "invoices", "refunds", "payouts", "wallet", "pricing",
    "tax", "fraud", "orders", "catalog", "search", "accounts", "identity",
)  # fmt: skip


def test_seconds_of_age_do_not_outweigh_relevance_inside_the_gate() -> None:
    """Min-max scaling stretched recency values 1e-5 apart over the whole [0, 1] range, so an
    entry inside the gate outranked the exact match by being saved a few seconds later."""
    minute = 60 / 86_400

    def score(relevance: float, days_old: float) -> TriScore:
        return TriScore(relevance, math.exp(-days_old / 7), 0.5, 0.0)

    scores = [score(1.0, minute)] + [score(0.85, minute * n / 60) for n in range(12)]
    totals = [s.total for s in weigh(scores, alpha=1, beta=1, gamma=1, relevance_gate=0.8)]
    assert totals[0] == max(totals), totals
    # Ages days apart still order entries inside the gate (the point of the lift).
    apart = weigh(
        [score(1.0, 3.0), score(0.95, 0.0), score(0.5, 3.0)],
        alpha=1,
        beta=1,
        gamma=1,
        relevance_gate=0.8,
    )
    assert apart[1].total > apart[0].total


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_an_exact_match_outranks_near_misses_saved_seconds_after_it(
    backend: str, tmp_path: Path
) -> None:
    """Found by tests/server/test_team_server.py: a recall by a memory's whole text, right
    after other agents saved a dozen loosely similar memories, did not return it (the final
    listing had it; a second recall missed it too). Nothing was stale: the ranking put every
    newer entry inside the relevance gate above the exact match, and the token budget cut it."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    if backend == "postgres":
        from store_testkit import fresh_pg_database, start_pgserver  # tests/storage

        url = fresh_pg_database(start_pgserver())
    settings = load_settings({}, cwd=tmp_path, environ={})
    memoir = await Memoir.open(url, settings=settings, embedder=create_embedder("hash:384"))
    try:
        start = NOW - timedelta(minutes=1)
        exact = await memoir.memories.remember(
            _EXACT, space=SPACE, created_at=start.isoformat(), now=start
        )
        assert exact.status == "created" and exact.memory is not None
        for n, team in enumerate(_TEAMS, start=1):
            text = _EXACT.replace("payments", team).replace("platform", team)
            moment = start + timedelta(seconds=n)
            near = await memoir.memories.remember(
                text, space=SPACE, created_at=moment.isoformat(), now=moment
            )
            assert near.status == "created", near
        found = await memoir.memories.recall(_EXACT, space=SPACE, now=NOW)
        inside_gate = [r for r in found.results if r.scores.relevance >= 0.8]
        assert len(inside_gate) >= 10, [r.scores for r in found.results]  # what this is about
        ranked = [(r.id, r.scores.relevance, r.scores.total) for r in found.results]
        assert ranked[0][0] == exact.memory.id, (
            f"the memory recalled by its whole text is not first: {ranked}"
        )
    finally:
        await memoir.close()
