"""The advertised tool list: names, schemas and annotations are a snapshot (changes must be
deliberate), and its serialized size stays within the token budget agents pay every session."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp_testkit import ServerUnderTest

from memory_core.tokens import create_token_counter
from server.mcp_app.tools import DEFAULT_TOOLS, EXTRA_TOOLS

pytestmark = pytest.mark.anyio

SNAPSHOT = Path(__file__).parent / "snapshots" / "tools_list.json"
TOKEN_BUDGET = 2200  # issue 11: the default set with the memory tools stays <= 2,200 tokens


async def _tools_list(server: ServerUnderTest) -> dict[str, Any]:
    async with server.client() as client:
        tools = await client.list_tools()
    return {
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools]
    }


def _wire(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


async def test_the_tool_list_matches_the_snapshot(sut: ServerUnderTest) -> None:
    payload = await _tools_list(sut)
    tokens = create_token_counter("tiktoken:o200k_base").count(_wire(payload))
    current = {"o200k_tokens": tokens, **payload}
    if os.environ.get("MEMOIR_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(current, indent=2, ensure_ascii=False) + "\n")
    expected = json.loads(SNAPSHOT.read_text())
    assert current == expected, "tool list changed: review, then MEMOIR_UPDATE_SNAPSHOTS=1"


async def test_the_default_tool_list_fits_the_token_budget(sut: ServerUnderTest) -> None:
    payload = await _tools_list(sut)
    assert [t["name"] for t in payload["tools"]] == list(DEFAULT_TOOLS)
    assert create_token_counter("tiktoken:o200k_base").count(_wire(payload)) <= TOKEN_BUDGET


async def test_every_tool_declares_all_four_annotations_and_an_output_schema(
    sut: ServerUnderTest,
) -> None:
    payload = await _tools_list(sut)
    for tool in payload["tools"]:
        assert set(tool["annotations"]) == {
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        }, tool["name"]
        assert tool["outputSchema"]["type"] == "object"
        assert tool["description"] and "Example" in tool["description"]
    writes = {t["name"] for t in payload["tools"] if not t["annotations"]["readOnlyHint"]}
    assert writes == {"upsert_markdown", "ingest", "remember", "forget", "pin", "memory_mode"}


async def test_extra_tools_appear_only_when_the_setting_is_on(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path, extra_tools=True)
    try:
        payload = await _tools_list(server)
    finally:
        await server.close()
    assert [t["name"] for t in payload["tools"]] == [*DEFAULT_TOOLS, *EXTRA_TOOLS]
