"""Export / import: lossless memoir JSONL, plain JSONL lines, the official memory server's
``memory.jsonl`` (malformed lines reported and skipped) and Claude Code's auto-memory folder;
roll-ups that link back to their sources."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from memory_testkit import SPACE

from memory_core.service import Memoir

pytestmark = pytest.mark.anyio


async def _populate(memoir: Memoir) -> None:
    m = memoir.memories
    first = await m.remember(
        "I prefer pnpm over npm", space=SPACE, tags=["tooling"], source_ids=["chat:1"]
    )
    await m.remember("i prefer pnpm over npm!", space=SPACE, manually_saved=True)
    await m.remember("The weekly sync is on Tuesdays at 10am", space=SPACE)
    await m.remember("The weekly sync moved to Wednesdays at 11am", space=SPACE)
    await m.remember("Queued entry without a vector", space=SPACE, embed_now=False)
    await m.remember("Another user's note", space="PestIQ", user="ben")
    await m.pin(first.memory.id, space=SPACE)  # type: ignore[union-attr]
    await m.update_settings(space=SPACE, incognito_default=False, soft_cap=150)


async def test_export_then_import_into_an_empty_store_is_lossless(
    memoir: Memoir, memoir_factory
) -> None:  # type: ignore[no-untyped-def]
    await _populate(memoir)
    first = io.StringIO()
    report = await memoir.memories.export(first)
    assert report.exported == 5 and report.settings == 2  # the merged repeat is one entry
    target = await memoir_factory("copy.db")
    imported = await target.memories.import_(io.StringIO(first.getvalue()).readlines())
    assert imported.imported == 5 and not imported.errors
    second = io.StringIO()
    await target.memories.export(second)
    assert second.getvalue() == first.getvalue()
    again = await target.memories.import_(first.getvalue().splitlines(keepends=True))
    assert again.imported == 0 and again.skipped == 5  # re-importing changes nothing
    recalled = await target.memories.recall("weekly sync", space=SPACE)
    assert recalled.results[0].text == "The weekly sync moved to Wednesdays at 11am"
    assert "The weekly sync is on Tuesdays at 10am" not in {r.text for r in recalled.results}


async def test_importing_into_another_space_derives_new_ids_and_keeps_links(memoir: Memoir) -> None:
    await _populate(memoir)
    out = io.StringIO()
    await memoir.memories.export(out, space=SPACE)
    report = await memoir.memories.import_(out.getvalue().splitlines(), space="copy")
    assert report.imported == 4
    copies = await memoir.memories.entries(space="copy", include_history=True)
    originals = await memoir.memories.entries(space=SPACE, include_history=True)
    assert not {e.id for e in copies.entries} & {e.id for e in originals.entries}
    superseded = [e for e in copies.entries if e.superseded_by]
    assert len(superseded) == 1 and superseded[0].superseded_by in {e.id for e in copies.entries}


async def test_plain_jsonl_lines_go_through_the_write_path(memoir: Memoir) -> None:
    lines = [
        json.dumps({"text": "Use ruff", "space": SPACE, "tags": ["lint"], "saved": True}),
        json.dumps({"text": "use ruff!", "space": SPACE}),
        "{not json",
        json.dumps({"space": SPACE}),
    ]
    report = await memoir.memories.import_(lines)
    assert (report.imported, report.merged, report.skipped) == (1, 1, 2)
    assert [e.line for e in report.errors] == [3, 4]


OFFICIAL = [
    {"type": "entity", "name": "John_Smith", "entityType": "person",
     "observations": ["Speaks fluent Spanish", "Prefers morning meetings"]},
    {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": []},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
]  # fmt: skip


async def test_the_official_memory_jsonl_imports_graph_and_memories_skipping_bad_lines(
    memoir: Memoir, tmp_path: Path
) -> None:
    path = tmp_path / "memory.jsonl"
    lines = [json.dumps(r) for r in OFFICIAL]
    lines.insert(1, '{"type": "entity", "name": ')  # truncated
    lines.append(json.dumps({"type": "relation", "from": "A"}))  # missing fields
    path.write_text("\n".join(lines))
    report = await memoir.memories.import_(path, format="official", space=SPACE)
    assert [e.line for e in report.errors] == [2, 5]
    assert (report.entities, report.relations) == (2, 1)
    assert report.imported == 3  # two observations and one relation
    graph = await memoir.memories.graph.read_graph(memoir.memories.space(SPACE))
    assert graph["entities"][0] == {
        "name": "John_Smith", "entityType": "person",
        "observations": ["Speaks fluent Spanish", "Prefers morning meetings"],
    }  # fmt: skip
    assert graph["relations"] == [
        {"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"}
    ]
    found = await memoir.memories.recall("who speaks spanish", space=SPACE)
    spanish = next(r for r in found.results if r.text == "John_Smith: Speaks fluent Spanish")
    assert spanish.source_ids == ["official:John_Smith"]
    assert spanish.scores.relevance == max(r.scores.relevance for r in found.results)


async def test_a_claude_code_auto_memory_folder_imports_each_memory_file(
    memoir: Memoir, tmp_path: Path
) -> None:
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "MEMORY.md").write_text(
        "- [Testing preferences](feedback_testing.md) — use real DB, not mocks\n"
        "- [User role](user_role.md) — data scientist\n"
        "- Builds run with `make ci`\n"
    )
    (folder / "feedback_testing.md").write_text(
        "---\nname: Testing preferences\ndescription: use real DB, not mocks\ntype: feedback\n---\n"
        "Integration tests must hit a real database, not mocks.\n"
    )
    (folder / "user_role.md").write_text(
        "---\nname: User role\ndescription: data scientist focused on observability\ntype: user\n---\n"
    )
    (folder / "broken.md").write_text("---\nname: Broken\n---\n")
    report = await memoir.memories.import_(folder, format="claude-code", space=SPACE)
    assert report.imported == 3
    assert [e.error.split(":")[0] for e in report.errors] == ["broken.md"]
    listed = await memoir.memories.entries(space=SPACE)
    by_text = {e.text: e for e in listed.entries}
    testing = by_text["Integration tests must hit a real database, not mocks."]
    assert {"claude-code", "feedback", "testing-preferences"} <= set(testing.tags)
    assert testing.source_ids == ["claude-code:feedback_testing.md"]
    assert "data scientist focused on observability" in by_text
    assert "Builds run with `make ci`" in by_text


async def test_rollups_summarise_old_entries_and_link_back_through_source_ids(
    memoir: Memoir,
) -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    old = now - timedelta(days=45)
    ids = []
    for text in (
        "The billing export runs nightly",
        "Billing invoices are batched per tenant",
        "The billing dashboard lives in Grafana",
    ):
        result = await memoir.memories.remember(
            text, space=SPACE, tags=["billing"], created_at=old, now=old
        )
        ids.append(result.memory.id)  # type: ignore[union-attr]
    fresh = await memoir.memories.remember(
        "Billing alerts page the on-call", space=SPACE, tags=["billing"], now=now
    )
    report = await memoir.memories.rollup(space=SPACE, older_than_days=30, now=now)
    assert report.archived == 3 and len(report.rollups) == 1
    rollup_id = report.rollups[0]["id"]
    rollup = await memoir.memories.show(rollup_id, space=SPACE)
    assert rollup.rollup and rollup.source_ids == [f"memory:{i}" for i in ids]
    assert rollup.text.startswith("Roll-up of 3 memories about billing")
    for original in ids:
        shown = await memoir.memories.show(original, space=SPACE)
        assert shown.superseded_by == rollup_id and shown.valid_to is not None
    current = {e.id for e in (await memoir.memories.entries(space=SPACE)).entries}
    assert current == {rollup_id, fresh.memory.id}  # type: ignore[union-attr]
    await memoir.memories.forget(rollup_id, space=SPACE)
    assert {e.id for e in (await memoir.memories.entries(space=SPACE)).entries} >= set(ids)
