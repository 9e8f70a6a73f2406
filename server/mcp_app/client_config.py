"""Client configuration snippets: the exact JSON and commands users paste into their clients.

The same functions feed ``memoir serve --print-config``, ``mcp.json`` and ``docs/clients.md``,
and the tests start servers from these very entries, so the documentation cannot drift from a
configuration that works.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "claude_code_command",
    "http_entry",
    "http_url",
    "mcp_servers_json",
    "stdio_entry",
]

SERVER_NAME = "memoir"


def stdio_entry(
    *, command: str = "memoir", db_url: str | None = None, workspace: str | None = None
) -> dict[str, Any]:
    """The ``mcpServers`` entry that spawns ``memoir serve`` over stdio."""
    args: list[str] = []
    if db_url:
        args += ["--db", db_url]
    args.append("serve")
    if workspace:
        args += ["--workspace", workspace]
    return {
        "command": command,
        "args": args,
        "env": {"MEMOIR_LOGGING__LEVEL": "warning"},
    }


def http_url(host: str, port: int, transport: str = "http") -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    path = "/sse" if transport == "sse" else "/mcp"
    return f"http://{shown}:{port}{path}"


def http_entry(
    url: str, *, transport: str = "http", token_env: str | None = None
) -> dict[str, Any]:
    """The ``mcpServers`` entry for a running HTTP (or SSE) server (Cursor, Cline, Claude Code);
    with ``token_env``, the bearer token is read from that environment variable."""
    entry: dict[str, Any] = {"type": "sse" if transport == "sse" else "http", "url": url}
    if token_env:
        entry["headers"] = {"Authorization": f"Bearer ${{{token_env}}}"}
    return entry


def mcp_servers_json(entry: dict[str, Any]) -> str:
    return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2)


def claude_code_command(
    *, url: str | None = None, transport: str = "http", token_env: str | None = None
) -> str:
    """The ``claude mcp add`` line for Claude Code."""
    if url:
        kind = "sse" if transport == "sse" else "http"
        header = f' --header "Authorization: Bearer ${token_env}"' if token_env else ""
        return f"claude mcp add --transport {kind} {SERVER_NAME} {url}{header}"
    return f"claude mcp add {SERVER_NAME} -- memoir serve"
