"""Both MCP revisions over real stdio: 2025-11-25 (initialize handshake, sessions) and 2026-07-28
(stateless: ``server/discover``, a protocol version on every request), whichever the client
negotiates. The same tools in the same order, the same answers, and nothing that needs the
deprecated sampling: the knowledge tree works offline."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_testkit import make_project, roots_callback, serve_command, server_env

from server.mcp_app.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

_WAIT_S = 60


def _params(tmp_path: Path, *args: str) -> StdioServerParameters:
    command = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", *args)
    return StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(), cwd=str(tmp_path)
    )


@pytest.mark.parametrize(
    ("mode", "negotiated"),
    [("legacy", "2025-11-25"), ("auto", "2026-07-28")],
)
async def test_each_revision_gets_the_same_tools_in_the_same_order_and_works_offline(
    tmp_path: Path, mode: str, negotiated: str
) -> None:
    project = make_project(tmp_path / "proj")
    with anyio.fail_after(_WAIT_S):
        async with Client(
            _params(tmp_path, "--extra-tools", "--workspace", str(tmp_path)),
            mode=mode,
            list_roots_callback=roots_callback(project),
        ) as client:
            assert client.protocol_version == negotiated  # by initialize, or by server/discover
            assert client.server_capabilities.tools is not None
            assert client.instructions and "query_directives" in client.instructions
            first = [t.name for t in (await client.list_tools()).tools]
            second = [t.name for t in (await client.list_tools()).tools]
            ingest = await client.call_tool(
                "ingest", {"text": "Backups run nightly at two and are kept for thirty days."}
            )
            answer = await client.call_tool("query", {"question": "how long are backups kept?"})
    assert first == second == [*DEFAULT_TOOLS, "list_rules", "search", "forget_knowledge"]
    assert not ingest.is_error and ingest.structured_content["model"] == "memoir-offline:clusters"
    assert not answer.is_error and "thirty days" in answer.structured_content["answer"]
