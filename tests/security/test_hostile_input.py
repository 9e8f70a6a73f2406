"""Hostile input gets a clear error naming the limit and the setting, never a crash: deep or
wide filters, long paths, unbounded stdin, oversized MCP requests, misspelled arguments."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_testkit import (
    ServerUnderTest,
    serve_command,
    server_env,
    start_http_server,
    stop_http_server,
)
from trust_kit import git_project, mcp_client

from memory_core.documents.fel import FilterLimits, parse_filter
from memory_core.documents.rql import parse_rql
from memory_core.errors import LimitExceededError

pytestmark = pytest.mark.anyio

_WAIT_S = 60
_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _memoir(
    tmp_path: Path, *args: str, stdin: bytes | None = None, **env: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", _ENTRY, "--db", f"sqlite:///{tmp_path / 'm.db'}", *args],
        cwd=tmp_path,
        env=server_env(**env),
        input=stdin,
        capture_output=True,
        timeout=_WAIT_S,
    )


DEEP_NOT = "NOT " * 5000 + "doc.path = 'x'"
DEEP_PARENS = "(" * 3000 + "doc.path = 'x'" + ")" * 3000
WIDE_OR = " OR ".join(f"doc.path = 'p{i}'" for i in range(1000))
WIDE_IN = "doc.path IN (" + ", ".join(f"'p{i}'" for i in range(1000)) + ")"


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        (DEEP_NOT, "limits.filter_depth"),
        (DEEP_PARENS, "limits.filter_depth"),
        (WIDE_OR, "limits.filter_terms"),
        (WIDE_IN, "limits.filter_terms"),
    ],
)
def test_filters_past_the_limits_are_refused_by_both_parsers(text: str, setting: str) -> None:
    for parse in (parse_filter, lambda t: parse_rql(f"SELECT * FROM chunk FILTER {t}")):
        with pytest.raises(LimitExceededError) as caught:
            parse(text)
        assert caught.value.setting == setting
        assert setting in str(caught.value) and "raise" in (caught.value.hint or "")


def test_the_limits_come_from_the_settings() -> None:
    tight = FilterLimits(max_depth=2, max_terms=3)
    parse_filter("NOT NOT doc.path = 'a'", tight)
    with pytest.raises(LimitExceededError):
        parse_filter("NOT NOT NOT doc.path = 'a'", tight)
    with pytest.raises(LimitExceededError):
        parse_filter("doc.path IN ('a', 'b', 'c', 'd')", tight)


def test_the_cli_reports_filter_limits_as_json_errors(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.md").write_text("alpha text")
    assert _memoir(tmp_path, "add", "a.md").returncode == 0
    for args in (
        ("search", "alpha", "--json", "--filter", DEEP_NOT),
        ("query", "--rql", f"SELECT doc.path FROM doc FILTER {WIDE_OR}", "--json"),
    ):
        done = _memoir(tmp_path, *args)
        assert done.returncode == 2, done.stderr.decode()[-2000:]
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "limit_exceeded" and error["details"]["setting"].startswith(
            "limits."
        )
        assert b"Traceback" not in done.stderr


def test_long_paths_are_refused_on_the_cli(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    for args in (("add", "a/" * 2500), ("rules", "upsert", "a/" * 2500), ("add", "b" * 300)):
        done = _memoir(tmp_path, *args)
        assert done.returncode == 2, done.stderr.decode()[-2000:]
        assert b"Traceback" not in done.stderr
        assert b"limits.path_chars" in done.stderr or b"File name too long" in done.stderr


async def test_long_paths_are_refused_by_upsert_markdown(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path)
    try:
        async with server.client(tmp_path) as client:
            long_path = await client.call_tool("upsert_markdown", {"paths": ["a/" * 2500]})
            long_name = await client.call_tool("upsert_markdown", {"paths": ["b" * 300]})
    finally:
        await server.close()
    assert long_path.is_error and "limits.path_chars" in long_path.content[0].text
    assert long_name.is_error and "too long" in long_name.content[0].text.lower()


def test_stdin_is_read_up_to_its_limit_only(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    command = [sys.executable, "-c", _ENTRY, "--db", f"sqlite:///{tmp_path / 'm.db'}"]
    process = subprocess.Popen(
        [*command, "ingest", "-", "--json"],
        cwd=tmp_path,
        env=server_env(MEMOIR_LIMITS__STDIN_BYTES="10000"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    def feed() -> None:  # far more than the limit; the reader stops long before the end
        assert process.stdin is not None
        try:
            for _ in range(400):
                process.stdin.write(b"x" * 65536)
            process.stdin.close()
        except (BrokenPipeError, ValueError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    out, err = process.communicate(timeout=_WAIT_S)
    writer.join(_WAIT_S)
    assert process.returncode == 2, err.decode()[-2000:]
    error = json.loads(out)["error"]
    assert error["code"] == "limit_exceeded" and error["details"]["setting"] == "limits.stdin_bytes"


async def test_misspelled_arguments_are_refused_with_the_right_name(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path)
    try:
        async with server.client(tmp_path) as client:
            result = await client.call_tool("query_directives", {"task": "add a form", "budget": 9})
    finally:
        await server.close()
    assert result.is_error
    assert "unknown argument 'budget' (did you mean 'token_budget'?)" in result.content[0].text


def _big_ingest() -> dict[str, Any]:
    return {"text": "A long note about deployments. " * 1000}


async def test_an_oversized_http_request_gets_an_error_naming_the_limit(tmp_path: Path) -> None:
    project = git_project(tmp_path / "p")
    server = start_http_server(
        tmp_path, "http", workspaces=(project,), env={"MEMOIR_LIMITS__REQUEST_BYTES": "8192"}
    )
    try:
        with anyio.fail_after(_WAIT_S):
            async with mcp_client(server.mcp_url) as client:
                with pytest.raises(MCPError) as caught:
                    await client.call_tool("ingest", _big_ingest())
                after = await client.call_tool("ingest", {"text": "A short note."})
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)
    assert "limits.request_bytes" in caught.value.error.message
    assert not after.is_error, after.content[0].text


async def test_an_oversized_stdio_request_gets_an_error_naming_the_limit(tmp_path: Path) -> None:
    project = git_project(tmp_path / "p")
    command = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", "--workspace", str(project))
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=server_env(MEMOIR_LIMITS__REQUEST_BYTES="8192"),
        cwd=str(tmp_path),
    )
    with anyio.fail_after(_WAIT_S):
        async with Client(params, mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("ingest", _big_ingest())
            after = await client.call_tool("ingest", {"text": "A short note."})
    assert "limits.request_bytes" in caught.value.error.message
    assert not after.is_error, after.content[0].text
