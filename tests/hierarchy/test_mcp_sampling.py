"""MCP sampling: the connected client's own model classifies and answers (no key needed).

A tiny ``MCPServer`` whose tools call the hierarchy with ``MCPSamplingModel(session=...)``, and the
SDK's in-process ``Client`` with a ``sampling_callback`` that plays the client's LLM from a
script. The core never imports ``mcp``; only this test and the server adapter do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from pydantic_ai.models.mcp_sampling import MCPSamplingModel

from memory_core.llm.prompts import extract_context
from memory_core.service import Memoir

from .conftest import open_memoir

pytestmark = pytest.mark.anyio


def client_llm(context: dict[str, Any]) -> dict[str, Any]:
    """The client's model, scripted: names categories, picks the first options, answers."""
    if context["task"] == "classify":
        if context["options"]:
            return {"category": context["options"][0], "is_new": False}
        return {"category": ["Nature", "Birds", "Owls"][context["level"] - 1], "is_new": True}
    if context["task"] == "select":
        return {"selected": [{"category": o} for o in context["options"][: context["count"]]]}
    if context["task"] == "answer":
        return {
            "answer": "Owls hunt at night.",
            "cited_chunk_ids": [context["passages"][0]["chunk_id"]],
        }
    return {"summary": context["text"][:100]}


def server_for(memoir: Memoir) -> MCPServer:
    app = MCPServer("hierarchy-sampling-test")

    @app.tool()
    async def ingest(text: str, ctx: Context) -> dict[str, Any]:
        result = await memoir.hierarchy.ingest_text(
            text, scope="s", model=MCPSamplingModel(session=ctx.session)
        )
        return result.model_dump(mode="json")

    @app.tool()
    async def query(question: str, ctx: Context) -> dict[str, Any]:
        result = await memoir.hierarchy.query(
            question, scope="s", model=MCPSamplingModel(session=ctx.session)
        )
        return result.model_dump(mode="json")

    return app


async def test_the_clients_model_classifies_and_answers_through_sampling(tmp_path: Path) -> None:
    memoir = await open_memoir(tmp_path)
    requests: list[str] = []

    async def sampling(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        prompt = "\n".join(
            m.content.text for m in params.messages if isinstance(m.content, types.TextContent)
        )
        task_context = extract_context(prompt)
        assert task_context is not None
        requests.append(task_context["task"])
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=json.dumps(client_llm(task_context))),
            model="client-llm-1",
        )

    try:
        # Sampling is a handshake-era capability (deprecated by the 2026-07-28 protocol).
        async with Client(server_for(memoir), sampling_callback=sampling, mode="legacy") as client:
            ingested = await client.call_tool("ingest", {"text": "Owls hunt mice at night."})
            assert not ingested.is_error
            ingest = ingested.structured_content
            assert ingest is not None and ingest["status"] == "ok"
            assert ingest["chunks"][0]["category_path"] == "Nature / Birds / Owls"
            assert ingest["model_used"] == {"classify": ["client-llm-1"]}

            answered = await client.call_tool("query", {"question": "When do owls hunt?"})
            result = answered.structured_content
            assert result is not None and result["status"] == "ok"
            assert result["answer"] == "Owls hunt at night."
            assert result["model_used"] == {"answer": ["client-llm-1"]}
        # Three classify calls (one per level); one level each offered a single option, so the
        # query needed only the final answer call.
        assert requests == ["classify", "classify", "classify", "answer"]
    finally:
        await memoir.close()


async def test_without_sampling_support_the_offline_model_answers(tmp_path: Path) -> None:
    memoir = await open_memoir(tmp_path)
    try:
        async with Client(server_for(memoir)) as client:  # no sampling callback
            ingested = await client.call_tool("ingest", {"text": "Owls hunt mice at night."})
            ingest = ingested.structured_content
            assert ingest is not None and ingest["status"] == "ok"
            assert ingest["model_used"] == {"classify": ["memoir-offline"]}
    finally:
        await memoir.close()
