"""docs/clients.md and mcp.json say exactly what the configuration code produces."""

from __future__ import annotations

import json

from mcp_testkit import REPO

from server.mcp_app.client_config import (
    claude_code_command,
    http_entry,
    http_url,
    mcp_servers_json,
    stdio_entry,
)
from server.mcp_app.tools import DEFAULT_TOOLS, EXTRA_TOOLS

DOC = (REPO / "docs" / "clients.md").read_text(encoding="utf-8")


def test_mcp_json_is_the_plain_stdio_entry() -> None:
    assert json.loads((REPO / "mcp.json").read_text()) == json.loads(
        mcp_servers_json(stdio_entry())
    )


def test_the_docs_show_the_snippets_the_code_produces() -> None:
    team_url = http_url("memoir.internal.example", 8765)
    for snippet in (
        mcp_servers_json(stdio_entry()),
        mcp_servers_json(stdio_entry(workspace="/absolute/path/to/your/project")),
        mcp_servers_json(http_entry(team_url, token_env="MEMOIR_TOKEN")),
        mcp_servers_json(http_entry(http_url("127.0.0.1", 8765, "sse"), transport="sse")),
        claude_code_command(),
        claude_code_command(url=team_url, token_env="MEMOIR_TOKEN"),
    ):
        assert snippet in DOC, snippet


def test_every_tool_is_documented() -> None:
    for name in (*DEFAULT_TOOLS, *EXTRA_TOOLS):
        assert f"`{name}`" in DOC, name
