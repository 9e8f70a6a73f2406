"""A pydantic-ai agent uses memoir over stdio the way a coding agent would: it calls
query_directives first, reads the context block, then answers. The model is a FunctionModel
(no network); the server is a real ``memoir serve`` subprocess."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

# pydantic-ai's MCP client is fastmcp (the `pydantic-ai-slim[mcp]` extra).
pytest.importorskip("fastmcp", reason="needs pydantic-ai-slim[mcp] (fastmcp-slim[client])")

from fastmcp.client.transports import StdioTransport
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_testkit import make_project, serve_command, server_env
from pydantic_ai import Agent, models
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

pytestmark = pytest.mark.anyio

models.ALLOW_MODEL_REQUESTS = False


def coding_agent_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """First turn: ask memoir for the task's directives. Second turn: answer, quoting the MUSTs."""
    returns = [
        part
        for message in messages
        for part in getattr(message, "parts", [])
        if isinstance(part, ToolReturnPart)
    ]
    if not returns:
        assert "query_directives" in {t.name for t in info.function_tools}
        return ModelResponse(
            parts=[
                ToolCallPart(
                    "query_directives", {"task": "add a versioned REST endpoint for orders"}
                )
            ]
        )
    content = str(returns[-1].content)
    musts = [line for line in content.splitlines() if "MUST" in line]
    return ModelResponse(parts=[TextPart("Following:\n" + "\n".join(musts))])


async def test_an_agent_calls_query_directives_and_uses_the_context_block(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    db_url = f"sqlite:///{tmp_path / 'memoir.db'}"
    command = serve_command(db_url, "--workspace", str(project))
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(), cwd=str(tmp_path)
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            loaded = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
    assert not loaded.is_error
    toolset = MCPToolset(
        StdioTransport(command[0], command[1:], env=server_env(), cwd=str(tmp_path))
    )
    agent = Agent(FunctionModel(coding_agent_model), toolsets=[toolset])
    with anyio.fail_after(60):
        async with agent:
            result = await agent.run("Add a versioned REST endpoint for orders.")
    assert result.output.startswith("Following:")
    assert "MUST" in result.output and "contract" in result.output
