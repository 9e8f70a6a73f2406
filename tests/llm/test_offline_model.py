"""The offline model: deterministic answers to every task, through real pydantic-ai agents."""

from __future__ import annotations

import pytest

from memory_core.config import LLMSettings
from memory_core.llm.agents import HierarchyAgents
from memory_core.llm.chain import build_step_model
from memory_core.llm.offline import OfflineModel
from memory_core.llm.profiles import STEPS, resolve_profile

pytestmark = pytest.mark.anyio

WHALE = (
    "The whale surfaced beside the ship. The whale was white, and the whale hunters on the "
    "ship shouted. Whales and ships filled the captain's log."
)


def agents_for(offline: OfflineModel) -> HierarchyAgents:
    llm = LLMSettings()
    return HierarchyAgents(
        {s: build_step_model(resolve_profile(llm, s), offline=offline.model) for s in STEPS}
    )


async def test_classify_reuses_a_similar_category_else_names_one_from_key_words(
    offline: OfflineModel,
) -> None:
    agents = agents_for(offline)
    reused = await agents.classify(
        text=WHALE, level=1, depth=3, path=[], options=["Gardening", "Whale"], allow_new=True
    )
    assert reused.output.category == "Whale" and reused.model_name == "memoir-offline"
    fresh = await agents.classify(
        text=WHALE, level=1, depth=3, path=[], options=["Gardening"], allow_new=True
    )
    assert fresh.output.category == "Whale" and fresh.output.is_new
    deeper = await agents.classify(
        text=WHALE, level=2, depth=3, path=["Whale"], options=[], allow_new=True
    )
    assert "whale" not in deeper.output.category.casefold()  # path words are not repeated
    assert len(deeper.output.category.split()) == 2


async def test_classify_at_the_cap_chooses_an_existing_name(offline: OfflineModel) -> None:
    agents = agents_for(offline)
    forced = await agents.classify(
        text=WHALE, level=1, depth=3, path=[], options=["Gardening", "Cooking"], allow_new=False
    )
    assert forced.output.category in {"Gardening", "Cooking"}


async def test_select_ranks_by_similarity_and_returns_exactly_count(offline: OfflineModel) -> None:
    agents = agents_for(offline)
    outcome = await agents.select(
        question="Where did the whale surface?",
        level=1,
        options=["Cooking", "Whale Hunting", "Gardening", "Ships"],
        count=2,
    )
    names = [s.category for s in outcome.output.selected]
    assert len(names) == 2 and names[0] == "Whale Hunting"
    assert all(1 <= s.ranked_relevance <= 10 for s in outcome.output.selected)


async def test_answer_is_extractive_and_cites_its_passages(offline: OfflineModel) -> None:
    agents = agents_for(offline)
    passages = [
        {"chunk_id": "c1", "category_path": "A", "text": "Bread needs flour. Ovens get hot."},
        {"chunk_id": "c2", "category_path": "B", "text": WHALE},
    ]
    outcome = await agents.answer(question="What colour was the whale?", passages=passages)
    assert "The whale was white" in outcome.output.answer
    assert outcome.output.cited_chunk_ids == ["c2"]


async def test_summary_stays_within_its_target(offline: OfflineModel) -> None:
    agents = agents_for(offline)
    outcome = await agents.summarise(
        question="whale", text=WHALE * 5, target_tokens=30, part=1, parts=1
    )
    assert 0 < offline.tokens.count(outcome.output.summary) <= 30


async def test_the_offline_model_is_deterministic(offline: OfflineModel) -> None:
    first = await agents_for(offline).select(
        question="ships", level=1, options=["Ships", "Sea", "Land"], count=2
    )
    second = await agents_for(offline).select(
        question="ships", level=1, options=["Ships", "Sea", "Land"], count=2
    )
    assert first.output.model_dump() == second.output.model_dump()
