"""Resources (rules, store summary), change notifications, and the two prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_testkit import ServerUnderTest, make_project
from mcp_types import ResourceListChangedNotification, ResourceUpdatedNotification

from server.mcp_app.prompts import FALLBACK_RULES

pytestmark = pytest.mark.anyio


async def test_rules_are_listed_and_read_as_markdown_resources(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    async with sut.client(project) as client:
        await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        listed = await client.list_resources()
        uris = [str(r.uri) for r in listed.resources]
        rule = await client.read_resource("memoir://rules/api-design")
        summary = await client.read_resource("memoir://store/summary")
        templates = await client.list_resource_templates()
    assert "memoir://store/summary" in uris and "memoir://rules/api-design" in uris
    text = rule.contents[0].text
    assert text.startswith("# ") and "## Directives" in text and "MUST" in text
    assert json.loads(summary.contents[0].text)["counts"]
    assert {t.uri_template for t in templates.resource_templates} >= {
        "memoir://rules/{rule_id}",
        "memoir://rules/{rule_id}/{directive_id}",
    }


async def test_a_single_directive_is_readable_and_an_unknown_rule_is_not_found(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    async with sut.client(project) as client:
        await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        rule = await client.read_resource("memoir://rules/api-design")
        directive_id = rule.contents[0].text.split("; id ", 1)[1].split(")", 1)[0]
        one = await client.read_resource(f"memoir://rules/api-design/{directive_id}")
        with pytest.raises(Exception, match="no-such-rule"):
            await client.read_resource("memoir://rules/no-such-rule")
    assert one.contents[0].text.startswith("[")
    assert "Source: rules/api-design.md" in one.contents[0].text


async def test_an_upsert_notifies_list_changed_and_subscribed_resources(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    received: list[Any] = []

    async def on_message(message: Any) -> None:
        received.append(message)

    async with sut.client(project, message_handler=on_message) as client:
        await client.subscribe_resource("memoir://rules/api-design")
        await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        await client.call_tool("detect_context", {"task": "x y"})  # notifications arrive first
    kinds = [type(m) for m in received]
    assert ResourceListChangedNotification in kinds
    updated = [m.params.uri for m in received if isinstance(m, ResourceUpdatedNotification)]
    assert "memoir://rules/api-design" in updated


async def test_the_session_prompt_frames_must_directives_as_non_negotiable(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "proj")
    async with sut.client(project) as client:
        await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        prompts = await client.list_prompts()
        got = await client.get_prompt("start_coding_session", {"task": "add a REST endpoint"})
    assert {p.name for p in prompts.prompts} == {"start_coding_session", "save_knowledge"}
    text = got.messages[0].content.text
    assert "non-negotiable" in text and "add a REST endpoint" in text
    assert "## Project rules" in text and "**MUST**" in text


async def test_the_session_prompt_falls_back_to_core_rules_when_memory_is_empty(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    async with sut.client(tmp_path) as client:
        got = await client.get_prompt("start_coding_session", {"task": "add a form"})
    text = got.messages[0].content.text
    assert FALLBACK_RULES in text and "Knowledge graph is empty" in text


async def test_the_save_knowledge_prompt_points_at_the_ingest_tool(sut: ServerUnderTest) -> None:
    async with sut.client() as client:
        got = await client.get_prompt("save_knowledge", {"topic": "deployment"})
    text = got.messages[0].content.text
    assert "`ingest`" in text and "deployment" in text
    # The agent is asked to classify with its own model, reusing the tree's names.
    assert "`category`" in text and "memoir://categories" in text


async def test_the_category_tree_of_saved_knowledge_is_a_resource(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    async with sut.client(tmp_path) as client:
        await client.call_tool("ingest", {"text": "Releases are cut from main every Tuesday."})
        listed = await client.list_resources()
        tree = await client.read_resource("memoir://categories")
        top = await client.read_resource("memoir://categories?depth=1")
    assert "memoir://categories" in [str(r.uri) for r in listed.resources]
    text = tree.contents[0].text
    assert text.startswith("# Knowledge categories") and "\n  - " in text
    assert "\n- " in top.contents[0].text and "\n  - " not in top.contents[0].text
