"""``memoir serve`` as a real subprocess over stdio: the SDK client, the raw wire, shutdown,
and the ``mcp.json`` entry clients are given."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_testkit import REPO, make_project, roots_callback, serve_command, server_env

from server.mcp_app.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

_WAIT_S = 60  # bound on every wait for a subprocess (slow CI machines)


def _params(tmp_path: Path, *args: str, **env: str) -> StdioServerParameters:
    command = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", *args)
    return StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(**env), cwd=str(tmp_path)
    )


async def test_a_stdio_client_lists_and_calls_every_tool(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    with anyio.fail_after(_WAIT_S):
        async with Client(
            _params(tmp_path, "--workspace", str(tmp_path)),
            mode="legacy",
            list_roots_callback=roots_callback(project),
        ) as client:
            tools = await client.list_tools()
            results = {
                "upsert_markdown": await client.call_tool("upsert_markdown", {"paths": ["rules"]}),
                "query_directives": await client.call_tool(
                    "query_directives", {"task": "add an API endpoint"}
                ),
                "detect_context": await client.call_tool("detect_context", {"task": "add a form"}),
                "ingest": await client.call_tool("ingest", {"text": "Releases ship on Tuesdays."}),
                "query": await client.call_tool("query", {"question": "when do releases ship?"}),
                "remember": await client.call_tool("remember", {"text": "User prefers pnpm."}),
                "recall": await client.call_tool("recall", {"query": "pnpm"}),
                "memory_mode": await client.call_tool("memory_mode", {"incognito": False}),
            }
            memory_id = results["remember"].structured_content["id"]
            results["pin"] = await client.call_tool("pin", {"memory_id": memory_id})
            results["forget"] = await client.call_tool("forget", {"memory_id": memory_id})
    assert [t.name for t in tools.tools] == list(DEFAULT_TOOLS)
    assert {name: r.is_error for name, r in results.items()} == dict.fromkeys(DEFAULT_TOOLS, False)
    assert "Tuesdays" in results["query"].structured_content["answer"]
    assert results["recall"].structured_content["memories"][0]["id"] == memory_id


async def test_the_modern_protocol_gets_roots_through_input_required(tmp_path: Path) -> None:
    alpha = make_project(tmp_path / "alpha", rules=("api-design.md",))
    with anyio.fail_after(_WAIT_S):
        async with Client(
            _params(tmp_path, "--workspace", str(tmp_path)),
            mode="auto",
            list_roots_callback=roots_callback(alpha),
        ) as client:
            upsert = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
            query = await client.call_tool("query_directives", {"task": "version a REST API"})
    assert not upsert.is_error and upsert.structured_content["directives_added"] > 0
    assert not query.is_error


async def _rpc(proc: Any, buffer: bytearray, message: dict[str, Any]) -> dict[str, Any] | None:
    await proc.stdin.send((json.dumps(message) + "\n").encode())
    if "id" not in message:
        return None
    while True:
        while b"\n" not in buffer:
            chunk = await proc.stdout.receive()
            buffer.extend(chunk)
        line, _, rest = bytes(buffer).partition(b"\n")
        buffer[:] = rest
        reply = json.loads(line)  # every stdout line must be a JSON-RPC message
        if reply.get("id") == message["id"]:
            return dict(reply)


async def _handshake(proc: Any, buffer: bytearray) -> None:
    await _rpc(
        proc,
        buffer,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        },
    )
    await _rpc(proc, buffer, {"jsonrpc": "2.0", "method": "notifications/initialized"})


@pytest.mark.parametrize("how", ["stdin-close", "sigterm", "sigint"])
async def test_shutdown_is_clean_and_loses_no_acknowledged_write(tmp_path: Path, how: str) -> None:
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    command = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", "--workspace", str(project))
    buffer = bytearray()
    with anyio.fail_after(_WAIT_S):
        async with await anyio.open_process(
            command, env=server_env(), cwd=str(tmp_path), stderr=None
        ) as proc:
            await _handshake(proc, buffer)
            reply = await _rpc(
                proc,
                buffer,
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "upsert_markdown", "arguments": {"paths": ["rules"]}},
                },
            )
            assert reply is not None and not reply["result"].get("isError")
            if how == "stdin-close":
                await proc.stdin.aclose()
            else:
                proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
            code = await proc.wait()
    assert code == 0
    # A fresh server on the same file sees the write.
    with anyio.fail_after(_WAIT_S):
        async with Client(_params(tmp_path, "--workspace", str(project)), mode="legacy") as client:
            query = await client.call_tool("query_directives", {"task": "design a REST API"})
    assert not query.is_error


async def test_mcp_json_starts_a_working_server(tmp_path: Path) -> None:
    entry = json.loads((REPO / "mcp.json").read_text())["mcpServers"]["memoir"]
    env = server_env(MEMOIR_DATABASE_URL=f"sqlite:///{tmp_path / 'memoir.db'}")
    env.update(entry.get("env", {}))
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=env, cwd=str(tmp_path)
    )
    with anyio.fail_after(_WAIT_S):
        async with Client(params, mode="legacy") as client:
            tools = await client.list_tools()
            detected = await client.call_tool("detect_context", {"task": "add a React page"})
    assert [t.name for t in tools.tools] == list(DEFAULT_TOOLS)
    assert detected.structured_content["detected_layer"] == "1-Presentation"
    assert os.path.exists(tmp_path / "memoir.db")


async def test_print_config_writes_the_snippet_to_stderr_and_nothing_to_stdout(
    tmp_path: Path,
) -> None:
    command = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", "--print-config")
    with anyio.fail_after(_WAIT_S):
        result = await anyio.run_process(
            command, input=b"", env=server_env(), cwd=str(tmp_path), check=False
        )
    assert result.returncode == 0
    assert result.stdout == b""
    stderr = result.stderr.decode()
    assert '"mcpServers"' in stderr and "claude mcp add memoir -- memoir serve" in stderr


def test_the_cli_import_path_does_not_load_the_mcp_sdk() -> None:
    code = "import sys, server.cli.main; print('mcp' in sys.modules)"
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", code], env=server_env(), capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "False", out.stderr
