"""memorize (seed 004 §2, §6.1, §8.1): resource, items with evidence, categories, intention."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, CHAT


def _text_of(chat: list[dict[str, str]]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in chat)


def test_items_carry_evidence_spans_confidence_stability_and_version(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    result = service.memorize(ALICE, conversation=CHAT)
    assert not result.duplicate and result.resource_id
    items = service.store.items({"org_id": ("acme",), "user_id": ("alice",)})
    assert {i.item_id for i in items} == set(result.items_added)
    text = _text_of(CHAT)
    coffee = next(i for i in items if "coffee" in i.text)
    (evidence,) = coffee.evidence
    start, end = evidence["span"]
    assert text[start:end] == coffee.text
    assert evidence["resource_id"] == result.resource_id and evidence["turn"] == 0
    assert coffee.stability == "stable" and coffee.version == 1
    assert 0 < coffee.confidence <= 1
    # the assistant's filler turn is not a memory
    assert not any("Anything else" in i.text for i in items)


def test_a_short_or_question_request_of_the_user_is_kept_and_titles_do_not_split_names(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    chat = [
        {"role": "user", "content": "How do I return the blue kettle?"},
        {"role": "assistant", "content": "Which order is it? Dr. Okafor from returns will help."},
        {"role": "user", "content": "Kettle refund status"},
        {"role": "user", "content": "Thanks!"},
    ]
    service.memorize(ALICE, conversation=chat)
    texts = {i.text for i in service.store.items({"org_id": ("acme",), "user_id": ("alice",)})}
    assert "How do I return the blue kettle?" in texts
    assert "Kettle refund status" in texts
    assert "Dr. Okafor from returns will help." in texts
    # the assistant's question and the user's filler stay out
    assert not texts & {"Which order is it?", "Thanks!"}


def test_memorize_is_idempotent_on_resource_hash_and_pipeline_revision(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    first = service.memorize(ALICE, conversation=CHAT)
    again = service.memorize(ALICE, conversation=CHAT)
    assert again.duplicate and again.resource_id == first.resource_id
    assert service.store.count_items({"org_id": ("acme",), "user_id": ("alice",)}) == len(
        first.items_added
    )
    # a new pipeline revision processes the same resource again: the items merge, not repeat
    service.config("extract_items", max_items=39)
    rerun = service.memorize(ALICE, conversation=CHAT)
    assert not rerun.duplicate and rerun.items_added == []
    assert sorted(rerun.items_merged) == sorted(first.items_added)
    merged = service.store.items_by_id(rerun.items_merged[:1])[0]
    assert merged.version == 2 and len(merged.evidence) == 2


def test_memorize_merges_a_near_duplicate_into_the_stored_item(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    first = service.memorize(ALICE, content="I always prefer dark roast coffee in the morning.")
    second = service.memorize(ALICE, content="I always prefer dark roast coffee in the mornings.")
    assert not second.duplicate and second.resource_id != first.resource_id  # another resource
    assert second.items_added == [] and second.items_merged == first.items_added
    assert service.store.count_items({"org_id": ("acme",), "user_id": ("alice",)}) == 1
    (item,) = service.store.items_by_id(first.items_added)
    assert item.version == 2
    assert [e["resource_id"] for e in item.evidence] == [first.resource_id, second.resource_id]
    # the step's threshold decides: above any cosine, the second statement is a new item
    service.config("dedupe_merge", merge_threshold=1.01)
    third = service.memorize(ALICE, content="I always prefer dark roast coffee at mornings.")
    assert len(third.items_added) == 1 and third.items_merged == []


def test_categories_get_counts_summaries_and_anchor_items(make_service: ServiceFactory) -> None:
    service = make_service()
    service.memorize(ALICE, conversation=CHAT)
    listed = service.list_categories(ALICE, include_items=True)
    assert [c["category_key"] for c in listed] == ["preferences", "work", "health"]
    total = sum(c["item_count"] for c in listed)
    assert total == service.store.count_items({"org_id": ("acme",), "user_id": ("alice",)})
    filled = [c for c in listed if c["item_count"]]
    for category in filled:
        assert category["anchor_ids"] and category["summary"]
        item_ids = {i["item_id"] for i in category["items"]}
        assert set(category["anchor_ids"]) <= item_ids
    one = service.get_category(ALICE, filled[0]["name"])
    assert one["category_key"] == filled[0]["category_key"]


def test_intention_collects_goals_constraints_and_progress(make_service: ServiceFactory) -> None:
    service = make_service()
    assert service.get_latest_intention(ALICE) is None
    service.memorize(ALICE, conversation=CHAT)
    first = service.get_latest_intention(ALICE)
    assert first is not None and first["version"] == 1
    assert any("billing migration" in g for g in first["goals"])
    assert any("legacy API" in c for c in first["constraints"])
    service.memorize(ALICE, content="We already finished the schema changes for billing.")
    second = service.get_latest_intention(ALICE)
    assert second is not None and second["version"] == 2
    assert any("schema changes" in p for p in second["progress"])
    assert second["goals"] == first["goals"]


def test_a_file_is_memorized_by_uri(make_service: ServiceFactory, tmp_path: Path) -> None:
    service = make_service()
    notes = tmp_path / "notes.md"
    notes.write_text("Our release train ships every second Tuesday from the main branch.\n")
    result = service.memorize(ALICE, uri=str(notes))
    (item,) = service.store.items_by_id(result.items_added)
    assert "release train" in item.text
    again = service.memorize(ALICE, uri=f"file://{notes}")
    assert again.duplicate


def test_a_missing_capability_is_reported_and_the_resource_still_stored(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    service = make_service()
    pdf = tmp_path / "scan.pdf"
    pdf.write_bytes(b"%PDF-1.4\n% not text\n")
    image = tmp_path / "whiteboard.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    for path, capability in ((pdf, "pdf_text"), (image, "ocr")):
        result = service.memorize(ALICE, uri=str(path))
        assert [m["capability"] for m in result.missing_capabilities] == [capability]
        assert result.items_added == []
        run = service.runs(1)[0]
        assert run["output"]["missing_capabilities"][0]["capability"] == capability
        assert service.memorize(ALICE, uri=str(path)).duplicate  # stored, so idempotent


def test_extraction_runs_through_a_pydantic_ai_model_when_a_profile_names_one(
    make_service: ServiceFactory,
) -> None:
    seen: list[str] = []

    def extractor(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(str(messages[0].parts[-1].content))  # type: ignore[union-attr]
        args = {
            "items": [
                {
                    "text": "Alice prefers dark roast coffee.",
                    "quote": "I always prefer dark roast coffee in the morning.",
                    "confidence": 0.9,
                    "stability": "stable",
                }
            ]
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])

    service = make_service(
        llm_providers={"default": {"model": "offline"}, "extractor": FunctionModel(extractor)},
        role_profiles={"extract": "extractor"},
    )
    result = service.memorize(ALICE, conversation=CHAT)
    (item,) = service.store.items_by_id(result.items_added)
    assert item.text == "Alice prefers dark roast coffee."
    start, end = item.evidence[0]["span"]
    assert _text_of(CHAT)[start:end] == item.evidence[0]["quote"]
    assert "billing migration" in seen[0]
    usage = service.runs(1)[0]["llm_usage"]["extract_items"][0]
    assert usage["profile"] == "extractor" and usage["requests"] == 1
