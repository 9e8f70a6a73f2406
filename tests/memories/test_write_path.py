"""The write path (spec "Write Path Policy"): near-duplicate merge, importance heuristics,
enrichment, needs_embedding, supersession, the LLM classifier option."""

from __future__ import annotations

import itertools

import pytest
from memory_testkit import SPACE
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.errors import InvalidInputError
from memory_core.memories.service import MemoryService
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio


async def _rows(memoir: Memoir) -> int:
    return await memoir.store.read(lambda tx: tx.items.count(None, kinds=("memory",)))


async def test_a_near_duplicate_merges_into_the_canonical_entry_instead_of_a_new_row(
    memoir: Memoir,
) -> None:
    first = await memoir.memories.remember(
        "I prefer pnpm over npm for the frontend", space=SPACE, tags=["tooling"],
        source_ids=["chat:1"],
    )  # fmt: skip
    again = await memoir.memories.remember(
        "i prefer PNPM over npm for the frontend. https://example.com/why",
        space=SPACE, tags=["frontend"], source_ids=["chat:2"], manually_saved=True,
    )  # fmt: skip
    assert first.status == "created" and again.status == "merged"
    assert await _rows(memoir) == 1
    merged = again.memory
    assert merged is not None and first.memory is not None
    assert merged.id == first.memory.id
    assert merged.repeat_count == 1
    assert merged.manually_saved is True  # OR-ed in
    assert {"tooling", "frontend"} <= set(merged.tags)
    assert merged.source_ids == ["chat:1", "chat:2"]
    # base 0.3 + preference 0.3 + manual 0.5 (clamped to 1), then + repeat boost
    assert merged.importance == 1.0 > first.memory.importance
    events = await memoir.store.read(
        lambda tx: tx.log.events(memoir.memories.space(SPACE).scope, kinds=["merge"])
    )
    assert len(events) == 1 and events[0].subject == merged.id


async def test_repeats_raise_importance_by_the_repeat_boost_up_to_its_cap(memoir: Memoir) -> None:
    text = "The API base URL for staging is api-staging.internal"
    first = await memoir.memories.remember(text, space=SPACE)
    assert first.memory is not None
    values = [first.memory.importance]
    for _ in range(8):
        values.append((await memoir.memories.remember(text, space=SPACE)).memory.importance)  # type: ignore[union-attr]
    steps = [round(b - a, 6) for a, b in itertools.pairwise(values)]
    assert steps[0] == pytest.approx(0.05)
    assert values[-1] == pytest.approx(min(1.0, values[0] + 0.3))  # repeat_boost_cap


async def test_a_merge_applies_the_pinning_policy_and_never_unpins(memoir: Memoir) -> None:
    text = "Deploys need two approvals"
    await memoir.memories.remember(text, space=SPACE)
    pinned = await memoir.memories.remember(text, space=SPACE, pin=True)
    assert pinned.memory is not None and pinned.memory.pinned
    again = await memoir.memories.remember(text, space=SPACE, pin=False)
    assert again.memory is not None and again.memory.pinned


@pytest.mark.parametrize(
    ("text", "manual", "expected"),
    [
        ("The API uses OAuth2 tokens", False, 0.3 + 0.2),  # fact with confident metadata
        ("I prefer tabs over spaces", False, 0.3 + 0.3),  # preference; metadata below 0.6
        ("Our goal is to ship the billing migration by March", False, 0.3 + 0.3 + 0.2),
        ("thanks!", False, 0.3 - 0.1),  # chit-chat
        ("The API uses OAuth2 tokens", True, 1.0),  # + explicit save, clamped
    ],
)
async def test_importance_follows_the_spec_heuristics(
    memoir: Memoir, text: str, manual: bool, expected: float
) -> None:
    result = await memoir.memories.remember(text, space=SPACE, manually_saved=manual)
    assert result.memory is not None
    assert result.memory.importance == pytest.approx(expected)


async def test_an_explicit_save_request_in_the_text_sets_manually_saved(memoir: Memoir) -> None:
    result = await memoir.memories.remember("Remember that staging is read-only", space=SPACE)
    assert result.memory is not None and result.memory.manually_saved


async def test_enrichment_extracts_entities_keyphrases_tags_and_a_confidence(
    memoir: Memoir,
) -> None:
    result = await memoir.memories.remember(
        "The weekly sync with Alice Chen is on Tuesdays at 10am", space=SPACE, tags=["team"]
    )
    memory = result.memory
    assert memory is not None
    assert {"Alice Chen", "tuesday", "10am"} <= set(memory.entities)
    assert "weekly sync" in memory.keyphrases
    assert memory.tags[:2] == ["team", "commitment"]
    assert 0.6 <= memory.metadata_confidence <= 1.0


async def test_a_new_entry_is_queued_for_embedding_and_the_backfill_clears_the_flag(
    memoir: Memoir,
) -> None:
    result = await memoir.memories.remember("Use ruff for linting", space=SPACE, embed_now=False)
    assert result.memory is not None and result.memory.needs_embedding
    assert result.memory.last_scores is not None  # relevance 0 on write, recency 1
    assert result.memory.last_scores["relevance"] == 0.0
    report = await memoir.memories.backfill(space=SPACE)
    assert report.embedded == 1 and report.remaining == 0
    shown = await memoir.memories.show(result.memory.id, space=SPACE)
    assert not shown.needs_embedding
    vectors = await memoir.store.read(
        lambda tx: tx.vectors.count(memoir.memories.space(SPACE).scope)
    )
    assert vectors == 1


async def test_a_changed_fact_supersedes_the_older_one_and_history_keeps_both(
    memoir: Memoir,
) -> None:
    old = await memoir.memories.remember("The weekly sync is on Tuesdays at 10am", space=SPACE)
    new = await memoir.memories.remember("The weekly sync moved to Wednesdays at 11am", space=SPACE)
    assert old.memory is not None and new.memory is not None
    assert new.superseded == [old.memory.id]
    history = await memoir.memories.history(new.memory.id, space=SPACE)
    assert [h.id for h in history] == [old.memory.id, new.memory.id]
    assert history[0].valid_to is not None and history[0].superseded_by == new.memory.id
    assert history[1].valid_to is None and history[1].supersedes == [old.memory.id]
    recalled = await memoir.memories.recall("weekly sync", space=SPACE)
    assert [r.id for r in recalled.results] == [new.memory.id]
    with_history = await memoir.memories.recall("weekly sync", space=SPACE, include_history=True)
    assert {r.id for r in with_history.results} == {old.memory.id, new.memory.id}


async def test_on_conflict_ask_writes_nothing_and_returns_the_conflict(memoir: Memoir) -> None:
    await memoir.memories.remember("Staging runs Postgres 15", space=SPACE)
    asked = await memoir.memories.remember(
        "Staging runs Postgres 16", space=SPACE, on_conflict="ask"
    )
    assert asked.status == "conflict" and asked.memory is None
    assert asked.conflicts[0].text == "Staging runs Postgres 15"
    assert await _rows(memoir) == 1
    kept = await memoir.memories.remember(
        "Staging runs Postgres 16", space=SPACE, on_conflict="keep"
    )
    assert kept.status == "created" and not kept.superseded


async def test_unrelated_facts_do_not_supersede_each_other(memoir: Memoir) -> None:
    await memoir.memories.remember("The weekly sync is on Tuesdays at 10am", space=SPACE)
    other = await memoir.memories.remember("The design review is on Thursdays at 3pm", space=SPACE)
    assert other.superseded == []


async def test_bad_input_is_refused_with_the_value_and_the_fix(memoir: Memoir) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        await memoir.memories.remember("   ", space=SPACE)
    with pytest.raises(InvalidInputError, match="role"):
        await memoir.memories.remember("x y z", space=SPACE, role="robot")
    with pytest.raises(InvalidInputError, match="8001 characters"):
        await memoir.memories.remember("a" * 8001, space=SPACE)
    assert await _rows(memoir) == 0


def _judge(category: str):  # type: ignore[no-untyped-def]
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f'{{"category": "{category}", "confidence": 0.9}}')])

    return answer


async def test_a_configured_model_classifies_importance(memoir: Memoir) -> None:
    service = MemoryService(memoir.context, importance_model=FunctionModel(_judge("goal")))
    result = await service.remember("Ship the billing migration", space=SPACE)
    assert result.memory is not None and result.memory.category == "goal"
    assert result.memory.importance == pytest.approx(0.3 + 0.3)  # offline would say "fact"
    assert not result.warnings


async def test_a_failing_model_falls_back_to_the_offline_classifier_with_a_warning(
    memoir: Memoir,
) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise OSError("connection refused")

    service = MemoryService(memoir.context, importance_model=FunctionModel(broken))
    result = await service.remember("I prefer tabs over spaces", space=SPACE)
    assert result.status == "created"
    assert result.memory is not None and result.memory.category == "preference"
    assert any("failed" in w and "offline classifier" in w for w in result.warnings)


async def test_code_anchors_are_captured_and_rechecked_valid_moved_or_stale(
    memoir: Memoir, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    source = root / "src" / "retry.py"
    source.write_text("import time\n\ndef retry():\n    time.sleep(1)\n    return 3\n")
    saved = await memoir.memories.remember(
        "retry() sleeps one second before giving up", space=SPACE, workspace=root,
        anchor={"path": "src/retry.py", "start_line": 3, "end_line": 5},
    )  # fmt: skip
    assert saved.memory is not None and saved.memory.anchor is not None
    assert saved.memory.anchor.status == "unchecked"
    recalled = await memoir.memories.recall("retry sleeps", space=SPACE, workspace=root)
    assert recalled.results[0].anchor is not None and recalled.results[0].anchor.status == "valid"
    source.write_text(
        "import time\n# moved down\n\ndef retry():\n    time.sleep(1)\n    return 3\n"
    )
    moved = await memoir.memories.show(saved.memory.id, space=SPACE, workspace=root)
    assert moved.anchor is not None and moved.anchor.status == "moved"
    assert (moved.anchor.now_start_line, moved.anchor.now_end_line) == (4, 6)
    source.write_text("def retry():\n    return 0\n")
    stale = await memoir.memories.show(saved.memory.id, space=SPACE, workspace=root)
    assert stale.anchor is not None and stale.anchor.status == "stale"
    from memory_core.errors import PathNotAllowedError

    with pytest.raises(PathNotAllowedError):
        await memoir.memories.remember(
            "escape", space=SPACE, workspace=root,
            anchor={"path": "../outside.py", "start_line": 1},
        )  # fmt: skip


async def test_an_update_cue_supersedes_a_fact_without_changed_values(memoir: Memoir) -> None:
    old = await memoir.memories.remember("Quarterly planning is held in room Orion", space=SPACE)
    new = await memoir.memories.remember("Quarterly planning is held in room Vega now", space=SPACE)
    assert old.memory is not None and new.superseded == [old.memory.id]
