"""query_directives end to end on a real SQLite store (Requirements 3, 4, 5, 10–12)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np
import pytest
from structlog.testing import capture_logs

from memory_core.embed.hashing import HashingEncoder
from memory_core.embed.local import LocalEmbedder
from memory_core.errors import EmptyKnowledgeGraphError, InvalidInputError, NotFoundError
from memory_core.rules.service import RulesService
from memory_core.scope import Scope
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio

TASK = "Add a login endpoint that creates user sessions"


async def test_empty_graph_gives_the_spec_message(service: RulesService) -> None:
    with pytest.raises(EmptyKnowledgeGraphError) as info:
        await service.query_directives(TASK, scope="s")
    assert info.value.message == (
        "Knowledge graph is empty. Please ingest rule documents using upsert_markdown."
    )


async def test_result_shape_and_diagnostics(loaded: RulesService) -> None:
    result = await loaded.query_directives(TASK, scope="s")
    diagnostics = result.diagnostics
    assert diagnostics.detected_layer == "2-Application"
    assert "authentication" in diagnostics.topics
    assert 0 <= diagnostics.confidence <= 1
    stats = diagnostics.retrieval_stats
    assert stats.searched == 9
    assert stats.selected == len(result.directives) <= stats.considered <= 9
    assert diagnostics.token_budget == 900  # the default (Requirement 4.6)
    assert diagnostics.tokens_used == loaded._ctx.tokens.count(result.context_block)
    assert diagnostics.tokens_used <= 900
    assert diagnostics.execution_ms > 0
    assert diagnostics.semantic_available
    assert result.context_block.startswith("## Project rules for this task")
    assert "layer 2-Application" in result.context_block.splitlines()[1]


async def test_directives_are_sorted_by_score_and_explained(loaded: RulesService) -> None:
    result = await loaded.query_directives(TASK, scope="s")
    scores = [d.score for d in result.directives]
    assert scores == sorted(scores, reverse=True)
    top = result.directives[0]
    assert top.rule_id == "auth"  # authoritative for the detected topic
    assert top.breakdown.authority == 1.0
    assert top.breakdown.total == top.score
    assert top.breakdown.reasons
    for directive in result.directives:
        assert (
            f"**{directive.severity}** {directive.text} [{directive.ref}]" in result.context_block
        )


async def test_citations_carry_path_lines_rule_and_directive_ids(loaded: RulesService) -> None:
    result = await loaded.query_directives(TASK, scope="s")
    by_id = {d.directive_id: d for d in result.directives}
    for citation in result.citations:
        directive = by_id[citation.directive_id]
        assert citation.rule_id == directive.rule_id
        assert citation.source_path.startswith("rules/")
        assert citation.line_start is not None and citation.line_end >= citation.line_start
    hashing = next(c for c in result.citations if "Hash passwords" in by_id[c.directive_id].text)
    lines = (Path(loaded._cwd) / hashing.source_path).read_text().splitlines()
    assert "Hash passwords" in lines[hashing.line_start - 1]


async def test_max_items_and_strict_layer(loaded: RulesService) -> None:
    capped = await loaded.query_directives(TASK, scope="s", max_items=2)
    assert len(capped.directives) == 2
    everything = await loaded.query_directives(TASK, scope="s")
    assert len(everything.directives) > 2
    # A task touching two layers: strict_layer keeps the detected one and the wildcard.
    mixed = TASK + ", with a migration for the sessions table and structured logging"
    assert any(
        d.layer == "4-Persistence"
        for d in (await loaded.query_directives(mixed, scope="s")).directives
    )
    strict = await loaded.query_directives(TASK, scope="s", strict_layer=True)
    assert {d.layer for d in strict.directives} <= {"2-Application", "*"}
    wildcard = await loaded.query_directives(
        TASK + " and log it", scope="s", strict_layer=True, max_items=50
    )
    assert any(d.layer == "*" for d in wildcard.directives)  # wildcard directives stay
    with pytest.raises(InvalidInputError):
        await loaded.query_directives(TASK, scope="s", max_items=0)


async def test_budget_is_respected_and_top_musts_are_forced(loaded: RulesService) -> None:
    tight = await loaded.query_directives(TASK, scope="s", token_budget=40)
    musts = [d for d in tight.directives if d.severity == "MUST"]
    # The forced MUSTs are the task's most relevant ones (at most three), not every MUST.
    assert 1 <= tight.diagnostics.forced_must == len(musts) <= 3
    assert all(d.forced for d in musts)
    roomy_musts = [
        d
        for d in (await loaded.query_directives(TASK, scope="s", token_budget=4000)).directives
        if d.severity == "MUST"
    ]
    assert [d.directive_id for d in musts] == [d.directive_id for d in roomy_musts[: len(musts)]]
    assert not [d for d in tight.directives if d.severity != "MUST"]
    assert tight.diagnostics.tokens_used <= 2000
    roomy = await loaded.query_directives(TASK, scope="s", token_budget=900)
    assert len(roomy.directives) > len(tight.directives)


async def test_breadcrumbs_only_when_asked(loaded: RulesService) -> None:
    plain = await loaded.query_directives(TASK, scope="s")
    crumbs = await loaded.query_directives(TASK, scope="s", include_breadcrumbs=True)
    assert "_source: rules/auth.md:" in crumbs.context_block
    assert "_source:" not in plain.context_block


async def test_mode_slug_shifts_weights(loaded: RulesService) -> None:
    default = await loaded.query_directives(TASK, scope="s")
    architect = await loaded.query_directives(TASK, scope="s", mode_slug="architect")
    assert architect.diagnostics.mode == "architect"
    assert architect.diagnostics.weights["layer_match"] > default.diagnostics.weights["layer_match"]
    unknown = await loaded.query_directives(TASK, scope="s", mode_slug="poet")
    assert any("unknown mode" in w for w in unknown.diagnostics.warnings)


async def test_graph_expansion_finds_directives_with_no_text_match(loaded: RulesService) -> None:
    # "sessions" makes the auth rule authoritative; "Offer passkeys" shares no word with it.
    result = await loaded.query_directives("sessions", scope="s")
    passkeys = next(d for d in result.directives if d.text == "Offer passkeys")
    assert "graph" in passkeys.matched_by
    assert "lexical" not in passkeys.matched_by
    assert passkeys.breakdown.authority == 1.0


class _LoadingEmbedder(LocalEmbedder):
    """The hashing embedder, pretending its model is still loading (server start-up)."""

    def __init__(self) -> None:
        super().__init__(HashingEncoder(384), embedder_id="hash:384")
        self.load_requested = False

    def is_ready(self) -> bool:
        return False

    def start_loading(self) -> None:
        self.load_requested = True

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise AssertionError("a query must not wait for the model")


async def test_loading_embedder_never_blocks_a_query(loaded: RulesService, memoir: Memoir) -> None:
    embedder = _LoadingEmbedder()
    memoir.context.embedder = embedder
    result = await loaded.query_directives(TASK, scope="s")
    assert "semantic ranking unavailable: embedding model loading" in result.diagnostics.warnings
    assert not result.diagnostics.semantic_available
    assert result.directives and all(d.breakdown.semantic_sim == 0 for d in result.directives)
    assert embedder.load_requested


async def test_ten_concurrent_queries_agree(loaded: RulesService) -> None:
    results: list[list[str]] = []

    async def one() -> None:
        answer = await loaded.query_directives(TASK, scope="s")
        results.append([d.directive_id for d in answer.directives])

    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(one)
    assert len(results) == 10
    assert all(r == results[0] for r in results)


async def test_query_logs_are_sanitized_and_bodyless(loaded: RulesService) -> None:
    task = "Add login\nFAKE LOG LINE " + "x" * 300
    with capture_logs() as logs:
        await loaded.query_directives(task, scope="s")
    entry = next(e for e in logs if e["event"] == "directives queried")
    assert "\n" not in entry["task"] and "\\n" in entry["task"]
    assert len(entry["task"]) <= 101
    assert len(entry["top_scores"]) <= 5
    assert {"layer", "topics", "candidates", "took_ms"} <= entry.keys()
    assert "Hash passwords" not in repr(logs)


async def test_index_follows_writes(loaded: RulesService, project: Path) -> None:
    before = await loaded.query_directives("backfill migrations", scope="s")
    await loaded.remove_rule("migrations", scope="s")
    after = await loaded.query_directives("backfill migrations", scope="s")
    assert any(d.rule_id == "migrations" for d in before.directives)
    assert not any(d.rule_id == "migrations" for d in after.directives)


async def test_list_and_show(loaded: RulesService) -> None:
    rules = {r.rule_id: r for r in await loaded.list_rules(scope="s")}
    assert set(rules) == {"auth", "api-validation", "migrations", "logging"}
    assert rules["auth"].directive_count == 3
    assert rules["auth"].authoritative_for == ["authentication", "sessions"]
    detail = await loaded.get_rule("auth", scope="s")
    assert [d.severity for d in detail.directives] == ["MUST", "SHOULD", "MAY"]
    assert detail.when_to_apply[0].startswith("Changing login")
    assert detail.related_rules == ["api-validation"]  # parsed, stored, and now returned
    with pytest.raises(NotFoundError):
        await loaded.get_rule("nope", scope="s")


async def test_writes_rebuild_the_index_so_queries_do_not_pay_for_it(
    loaded: RulesService, memoir: Memoir, project: Path
) -> None:
    from memory_core.rules.persistence import graph_version

    version = await memoir.store.read(lambda tx: graph_version(tx, Scope.of("s")))
    assert loaded._indexes[Scope.of("s")].version == version
    await loaded.remove_rule("logging", scope="s")
    version = await memoir.store.read(lambda tx: graph_version(tx, Scope.of("s")))
    assert loaded._indexes[Scope.of("s")].version == version
    assert "logging" not in loaded._indexes[Scope.of("s")].rules


async def test_in_memory_vectors_rank_like_the_vector_index(
    loaded: RulesService, memoir: Memoir
) -> None:
    from memory_core.config import load_settings

    in_memory = await loaded.query_directives(TASK, scope="s")
    assert loaded._indexes[Scope.of("s")].vectors is not None
    settings = load_settings({"rules": {"memory_vectors_max": 0}}, cwd=loaded._cwd, environ={})
    memoir.context.settings = settings
    from_store = RulesService(memoir.context, cwd=loaded._cwd)
    stored = await from_store.query_directives(TASK, scope="s")
    assert from_store._indexes[Scope.of("s")].vectors is None
    assert [d.directive_id for d in stored.directives] == [
        d.directive_id for d in in_memory.directives
    ]
    assert [d.breakdown.semantic_sim for d in stored.directives] == pytest.approx(
        [d.breakdown.semantic_sim for d in in_memory.directives], abs=1e-3
    )
