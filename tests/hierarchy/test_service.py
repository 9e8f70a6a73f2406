"""HierarchyService with scripted models: classification, the cap, strategies, budget, runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from memory_core.errors import NotFoundError
from memory_core.hierarchy.port_store import CHUNK_KIND
from memory_core.scope import Scope
from memory_core.service import Memoir, MemoirSync

from .conftest import Script, answer_all, first_option_or, make_settings, open_memoir, pick_first

pytestmark = pytest.mark.anyio


def by_label(context: dict[str, Any]) -> dict[str, Any]:
    """Classify by the '[A/B/C]' label at the start of the chunk text."""
    labels = context["text"].split("]", 1)[0].lstrip("[").split("/")
    return {"category": labels[context["level"] - 1], "is_new": True}


def labelled(labels: str, body: str) -> str:
    return f"[{labels}] {body}"


async def build_tree(memoir: Memoir, script: Script, tops: int = 8, per_leaf: int = 1) -> None:
    """``tops`` level-1 categories T0.., each with children A and B, each with one leaf L."""
    for t in range(tops):
        for child in ("A", "B"):
            for n in range(per_leaf):
                text = labelled(f"T{t}/{child}/L", f"passage {n} about topic {t} {child} " * 4)
                await memoir.hierarchy.ingest_text(text, scope="s", model=script.model)


async def test_classification_is_one_call_per_level_presenting_existing_categories(
    memoir: Memoir,
) -> None:
    script = Script(classify=first_option_or("Topic"))
    first = await memoir.ingest_text(
        "The first text about sailing ships.", scope="s", model=script.model
    )
    second = await memoir.ingest_text("A second text on whales.", scope="s", model=script.model)
    assert first.ok and second.ok
    assert first.llm_calls == 3 and second.llm_calls == 3
    levels = [c["level"] for c in script.tasks("classify")]
    assert levels == [1, 2, 3, 1, 2, 3]
    # The second chunk was shown the categories the first one created, and reused them.
    assert [c["options"] for c in script.tasks("classify")[3:]] == [
        ["Topic 1"],
        ["Topic 2"],
        ["Topic 3"],
    ]
    assert second.chunks[0].category_path == "Topic 1 / Topic 2 / Topic 3"
    assert (await memoir.hierarchy.categories(scope="s")).total == 3
    assert first.model_used == {"classify": ["scripted"]}


async def test_short_text_is_kept_with_a_warning(memoir: Memoir) -> None:
    result = await memoir.ingest_text("Tiny.", scope="s")
    assert result.ok and len(result.chunks) == 1
    assert any("below the minimum" in w for w in result.warnings)


async def test_reingesting_the_same_text_changes_nothing_and_calls_no_model(
    memoir: Memoir,
) -> None:
    script = Script(classify=first_option_or("Topic"))
    text = (Path(__file__).parents[1] / "data" / "alice_chapter1.txt").read_text()
    first = await memoir.ingest_text(text, scope="s", model=script.model)
    calls = len(script.calls)
    again = await memoir.ingest_text(text, scope="s", model=script.model)
    assert len(script.calls) == calls and again.llm_calls == 0
    assert [c.chunk_id for c in again.chunks] == [c.chunk_id for c in first.chunks]
    assert all(c.already_stored for c in again.chunks)
    assert [c.category_path for c in again.chunks] == [c.category_path for c in first.chunks]


async def test_cap_forces_a_literal_choice_of_existing_categories(tmp_path: Path) -> None:
    memoir = await open_memoir(tmp_path, make_settings(tmp_path, depth=2, max_categories=4))
    counter = iter(range(1000))

    def propose_new(context: dict[str, Any]) -> dict[str, Any]:
        if context["allow_new"] or context["attempt"] == 1:
            # Below the cap a fresh name; at the cap the first attempt still tries one.
            return {"category": f"Fresh {next(counter)}", "is_new": True}
        return {"category": context["options"][-1]}

    script = Script(classify=propose_new)
    try:
        for n in range(4):
            result = await memoir.ingest_text(f"text number {n}", scope="s", model=script.model)
            assert result.ok, result.error
        tree = await memoir.hierarchy.categories(scope="s")
        assert tree.total == 4  # never above the cap
        forced = [c for c in script.tasks("classify") if not c["allow_new"]]
        assert forced, "the cap was reached, so later calls must forbid new names"
        # The invented name failed the Literal type and was retried with a choice.
        assert ("classify", 2) in script.requests
    finally:
        await memoir.close()


@pytest.mark.parametrize(
    ("strategy", "counts", "options", "leaves"),
    [
        ("one_shot", [1, 1], [8, 2], 1),
        ("wide_branch", [3, 3], [8, 6], 3),
        ("zoom_in", [6, 4], [8, 12], 4),
        ("branch_out", [6, 8], [8, 12], 8),
    ],
)
async def test_each_strategy_selects_its_count_per_level(
    memoir: Memoir, strategy: str, counts: list[int], options: list[int], leaves: int
) -> None:
    await build_tree(memoir, Script(classify=by_label))
    script = Script(select=pick_first, answer=answer_all)
    result = await memoir.query(
        "topic?", scope="s", strategy=strategy, max_token_budget=100_000, model=script.model
    )
    assert result.ok, result.error
    selects = script.tasks("select")
    assert [c["count"] for c in selects] == counts
    assert [len(c["options"]) for c in selects] == options
    # The last level offers exactly as many leaves as wanted: taken without a call.
    assert len(result.explored_paths) == leaves
    assert result.llm_calls == {"traverse": len(counts), "answer": 1}
    assert {c.chosen_strategy for c in result.used_chunks} == {strategy}
    multi = leaves > 1
    assert all((c.ranked_relevance is not None) == multi for c in result.used_chunks)


async def test_strategy_comes_from_configuration_unless_given_per_call(tmp_path: Path) -> None:
    memoir = await open_memoir(tmp_path, make_settings(tmp_path, strategy="wide_branch"))
    try:
        await build_tree(memoir, Script(classify=by_label), tops=4)
        script = Script(select=pick_first, answer=answer_all)
        configured = await memoir.query("q", scope="s", model=script.model)
        per_call = await memoir.query("q", scope="s", strategy="one_shot", model=script.model)
        assert configured.strategy == "wide_branch" and len(configured.explored_paths) == 3
        assert per_call.strategy == "one_shot" and len(per_call.explored_paths) == 1
    finally:
        await memoir.close()


async def test_budget_stops_reading_exactly_at_the_boundary(memoir: Memoir) -> None:
    await build_tree(memoir, Script(classify=by_label), tops=3, per_leaf=3)
    script = Script(select=pick_first, answer=answer_all)
    everything = await memoir.query(
        "q", scope="s", strategy="wide_branch", max_token_budget=100_000, model=script.model
    )
    ordered = everything.used_chunks
    assert len(ordered) == 9
    # Deterministic order: path order, then created_at, then chunk id.
    keys = [
        (everything.explored_paths.index(c.category_path), c.created_at, c.chunk_id)
        for c in ordered
    ]
    assert keys == sorted(keys)
    budget = sum(c.token_count for c in ordered[:4]) + ordered[4].token_count - 1
    limited = await memoir.query(
        "q", scope="s", strategy="wide_branch", max_token_budget=budget, model=script.model
    )
    assert [c.chunk_id for c in limited.used_chunks] == [c.chunk_id for c in ordered[:4]]
    assert sum(c.token_count for c in limited.used_chunks) <= budget
    # Chunk 5 sits in the second path; the third path was never queried.
    assert limited.dropped_paths == [everything.explored_paths[2]]
    run = (await memoir.hierarchy.runs(scope="s", limit=1))[0]["payload"]
    assert run["stopped_at"] == ordered[4].chunk_id
    assert run["rows_read"] == 5  # the 4 rows used and the one that did not fit: no more
    assert run["dropped_paths"] == limited.dropped_paths
    assert not run["summarized"]


async def test_summarise_mode_makes_m_parts_within_five_percent_of_the_budget(
    memoir: Memoir,
) -> None:
    await build_tree(memoir, Script(classify=by_label), tops=3, per_leaf=3)

    def verbose(context: dict[str, Any]) -> dict[str, Any]:
        return {"summary": context["text"] * 2}  # ignores the target: must be cut to it

    script = Script(select=pick_first, summarise=verbose, answer=answer_all)
    full = await memoir.query(
        "q", scope="s", strategy="wide_branch", max_token_budget=100_000, model=script.model
    )
    total = full.candidate_tokens
    budget = total // 3 - 5
    result = await memoir.query(
        "q",
        scope="s",
        strategy="wide_branch",
        max_token_budget=budget,
        summarize=True,
        model=script.model,
    )
    parts = math.ceil(total / budget)
    assert result.ok and result.summarized and result.parts == parts
    summaries = script.tasks("summarise")[-parts:]
    assert [c["target_tokens"] for c in summaries] == [budget // parts] * parts
    run = (await memoir.hierarchy.runs(scope="s", limit=1))[0]["payload"]
    assert len(run["part_tokens"]) == parts and sum(run["part_tokens"]) >= total * 0.9
    assert sum(run["summary_tokens"]) <= budget * 1.05
    assert run["summaries_truncated"] == parts
    final = script.tasks("answer")[-1]
    assert len(final["passages"]) == parts
    assert len(result.used_chunks) == 9 and result.dropped_paths == []


async def test_an_empty_leaf_is_reported_not_fatal(memoir: Memoir) -> None:
    await build_tree(memoir, Script(classify=by_label), tops=2)
    store = await memoir.hierarchy.store()
    top = await store.create_category(Scope.of("s"), parent_id=None, level=1, name="Empty")
    mid = await store.create_category(Scope.of("s"), parent_id=top.category_id, level=2, name="E")
    await store.create_category(Scope.of("s"), parent_id=mid.category_id, level=3, name="Nothing")
    script = Script(select=pick_first, answer=answer_all)
    with capture_logs() as logs:
        result = await memoir.query("q", scope="s", strategy="wide_branch", model=script.model)
    assert result.ok
    assert result.empty_leaves == ["Empty / E / Nothing"]
    assert result.used_chunks and result.warnings
    assert any(e["log_level"] == "error" and "no chunks" in e["event"] for e in logs)


async def test_only_empty_leaves_is_an_error_result_with_a_hint(memoir: Memoir) -> None:
    store = await memoir.hierarchy.store()
    top = await store.create_category(Scope.of("s"), parent_id=None, level=1, name="Empty")
    mid = await store.create_category(Scope.of("s"), parent_id=top.category_id, level=2, name="E")
    await store.create_category(Scope.of("s"), parent_id=mid.category_id, level=3, name="Nothing")
    result = await memoir.query("q", scope="s")
    assert result.status == "error" and result.error and result.error.code == "no_chunks"
    assert result.error.hint
    with pytest.raises(NotFoundError):
        result.raise_for_status()


async def test_querying_an_empty_scope_says_to_ingest_first(memoir: Memoir) -> None:
    result = await memoir.query("anything?", scope="nothing-here")
    assert result.status == "error" and result.error is not None
    assert result.error.code == "empty_hierarchy" and "ingest" in (result.error.hint or "")
    runs = await memoir.hierarchy.runs(scope="nothing-here")
    assert runs and runs[0]["payload"]["status"] == "error"


async def test_invalid_selection_is_retried_with_a_clarified_prompt(memoir: Memoir) -> None:
    await build_tree(memoir, Script(classify=by_label), tops=4)

    def sloppy(context: dict[str, Any]) -> Any:
        if context["attempt"] == 1:
            return {"selected": [{"category": context["options"][0]}] * 2}  # duplicate
        if context["attempt"] == 2:
            return "not json at all"
        return pick_first(context)

    script = Script(select=sloppy, answer=answer_all)
    result = await memoir.query("q", scope="s", strategy="wide_branch", model=script.model)
    assert result.ok
    assert [a for t, a in script.requests if t == "select"][:3] == [1, 2, 3]


async def test_output_invalid_after_three_retries_is_an_error_with_remediation(
    memoir: Memoir,
) -> None:
    await build_tree(memoir, Script(classify=by_label), tops=4)
    script = Script(select=lambda context: "never valid", answer=answer_all)
    result = await memoir.query("q", scope="s", strategy="wide_branch", model=script.model)
    assert result.status == "error" and result.error and result.error.code == "model_error"
    assert "offline" in (result.error.hint or "")
    assert [a for t, a in script.requests if t == "select"] == [1, 2, 3, 4]


async def test_a_failing_model_falls_back_to_offline_with_a_warning(memoir: Memoir) -> None:
    def down(context: dict[str, Any]) -> Any:
        raise ConnectionError("provider is down")

    script = Script(classify=down, select=down, answer=down)
    with capture_logs() as logs:
        ingested = await memoir.ingest_text(
            "Whales and ships at sea.", scope="s", model=script.model
        )
        answered = await memoir.query("whales?", scope="s", model=script.model)
    assert ingested.ok and answered.ok
    assert ingested.model_used == {"classify": ["memoir-offline"]}
    assert answered.model_used["answer"] == ["memoir-offline"]
    assert any(e["log_level"] == "warning" and "falling back" in e["event"] for e in logs)
    assert any("classify step fell back to the offline model" in w for w in ingested.warnings)
    assert any("answer step fell back to the offline model" in w for w in answered.warnings)


async def test_an_unusable_configured_provider_is_skipped_and_recorded(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    settings = settings.model_copy(
        update={"llm": settings.llm.model_copy(update={"model": "nosuchprovider:model-x"})}
    )
    memoir = await open_memoir(tmp_path, settings)
    try:
        result = await memoir.ingest_text("Some text about gardens.", scope="s")
        assert result.ok and result.model_used == {"classify": ["memoir-offline:clusters"]}
        run = (await memoir.hierarchy.runs(scope="s", kind="hierarchy_ingest"))[0]["payload"]
        assert run["models"]["classify"]["skipped"][0]["model"] == "nosuchprovider:model-x"
        # Never silent: every result says the configured model was not used, and why.
        answer = await memoir.query("gardens?", scope="s")
        for warnings in (result.warnings, answer.warnings):
            [warning] = [w for w in warnings if "nosuchprovider:model-x" in w]
            assert "cannot be used: Unknown model" in warning
            assert "used the offline model" in warning
    finally:
        await memoir.close()


async def test_each_query_records_its_run(memoir: Memoir) -> None:
    await build_tree(memoir, Script(classify=by_label), tops=4)
    script = Script(select=pick_first, answer=answer_all)
    result = await memoir.query(
        "q", scope="s", strategy="wide_branch", max_token_budget=500, model=script.model
    )
    run = (await memoir.hierarchy.runs(scope="s", kind="hierarchy_query"))[0]
    assert run["run_id"] == result.run_id
    payload = run["payload"]
    for key in (
        "strategy",
        "explored_paths",
        "confidences",
        "candidate_tokens",
        "budget",
        "summarized",
        "dropped_paths",
        "llm_calls",
        "input_tokens",
        "output_tokens",
        "latency_s",
        "ranked",
    ):
        assert key in payload, key
    assert payload["strategy"] == "wide_branch" and payload["budget"] == 500
    assert payload["explored_paths"] == result.explored_paths
    assert payload["confidences"][0]["confidence"][0] == pytest.approx(0.9)
    # Deterministic mode: temperature 0 and the provider parameters recorded per step.
    assert payload["models"]["answer"]["temperature"] == 0.0
    assert payload["models"]["answer"]["deterministic"] is True


async def test_citations_name_chunk_ids_and_paths(memoir: Memoir) -> None:
    await build_tree(memoir, Script(classify=by_label), tops=2)
    script = Script(select=pick_first, answer=answer_all)
    result = await memoir.query("q", scope="s", strategy="wide_branch", model=script.model)
    assert result.citations
    used = {c.chunk_id: c.category_path for c in result.used_chunks}
    assert all(used[c.chunk_id] == c.category_path for c in result.citations)


async def test_chunks_are_found_by_the_shared_hybrid_indexes(memoir: Memoir) -> None:
    result = await memoir.ingest_text("Quokkas live on Rottnest Island.", scope="s")
    from memory_core.storage.ports import LexicalQuery

    scope = Scope.of("s")
    hits = await memoir.store.read(
        lambda tx: tx.lexical.search(LexicalQuery(("quokkas",)), scope, kinds=[CHUNK_KIND])
    )
    assert [h.item_id for h in hits] == [result.chunks[0].item_id]
    vector = await memoir.embedder.embed_query("Quokkas live on Rottnest Island.")
    near = await memoir.store.vector_search(vector, scope, kinds=[CHUNK_KIND], k=1)
    assert near.hits[0].item_id == result.chunks[0].item_id


def test_the_sync_api_ingests_and_queries(tmp_path: Path) -> None:
    from memory_core.embed import create_embedder

    with MemoirSync(
        f"sqlite:///{tmp_path}/sync.db",
        settings=make_settings(tmp_path),
        embedder=create_embedder("hash:384"),
    ) as memoir:
        ingested = memoir.ingest_text("The lighthouse keeper trims the lamp at dusk.", scope="s")
        answered = memoir.query("Who trims the lamp?", scope="s")
        tree = memoir.hierarchy.categories(scope="s")
    assert ingested.ok and answered.ok and tree.total == 3
    assert "lamp" in (answered.answer or "")


async def test_a_cited_summary_cites_the_chunks_it_condensed(memoir: Memoir) -> None:
    await build_tree(memoir, Script(classify=by_label), tops=3, per_leaf=3)

    def cite_second(context: dict[str, Any]) -> dict[str, Any]:
        return {"answer": "from part two", "cited_chunk_ids": ["summary-2"]}

    script = Script(
        select=pick_first, summarise=lambda c: {"summary": c["text"][:50]}, answer=cite_second
    )
    full = await memoir.query(
        "q", scope="s", strategy="wide_branch", max_token_budget=100_000, model=script.model
    )
    budget = full.candidate_tokens // 3 + 1
    result = await memoir.query(
        "q",
        scope="s",
        strategy="wide_branch",
        max_token_budget=budget,
        summarize=True,
        model=script.model,
    )
    assert result.summarized and result.parts == 3
    cited = [c.chunk_id for c in result.citations]
    # Part two of three covers the middle of the ordered chunks, not all of them.
    assert cited and set(cited) < {c.chunk_id for c in result.used_chunks}
    assert cited == [c.chunk_id for c in result.used_chunks if c.chunk_id in cited]
    assert result.used_chunks[0].chunk_id not in cited
    assert result.used_chunks[-1].chunk_id not in cited
