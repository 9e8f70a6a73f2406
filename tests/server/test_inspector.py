"""The official MCP Inspector (``@modelcontextprotocol/inspector --cli``) drives the server over
stdio and over streamable HTTP. The Inspector is installed with npm into a cache folder the
tests own, on first use."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_testkit import (
    RunningServer,
    make_project,
    serve_command,
    server_env,
    start_http_server,
    stop_http_server,
)

from server.mcp_app.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.slow

_INSTALL_S = 600
_CALL_S = 120
_PACKAGE = "@modelcontextprotocol/inspector"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memoir-tests" / "inspector"


@pytest.fixture(scope="module")
def inspector() -> Path:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm/node are not installed: the MCP Inspector cannot run here")
    folder = _cache_dir()
    binary = folder / "node_modules" / ".bin" / "mcp-inspector"
    if not binary.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), _PACKAGE],
            check=True,
            capture_output=True,
            timeout=_INSTALL_S,
        )
    return binary


def _inspect(inspector: Path, target: list[str], *args: str) -> Any:
    out = subprocess.run(
        [str(inspector), "--cli", *target, *args],
        capture_output=True,
        text=True,
        timeout=_CALL_S,
        env=server_env(),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.fixture
def stdio_target(tmp_path: Path) -> list[str]:
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    return serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", "--workspace", str(project))


def test_the_inspector_lists_tools_resources_and_prompts_over_stdio(
    inspector: Path, stdio_target: list[str]
) -> None:
    tools = _inspect(inspector, stdio_target, "--method", "tools/list")
    prompts = _inspect(inspector, stdio_target, "--method", "prompts/list")
    templates = _inspect(inspector, stdio_target, "--method", "resources/templates/list")
    assert [t["name"] for t in tools["tools"]] == list(DEFAULT_TOOLS)
    assert all("outputSchema" in t and "annotations" in t for t in tools["tools"])
    assert {p["name"] for p in prompts["prompts"]} == {"start_coding_session", "save_knowledge"}
    assert templates["resourceTemplates"]


def test_the_inspector_calls_the_rules_tools_over_stdio(
    inspector: Path, stdio_target: list[str]
) -> None:
    call = ["--method", "tools/call", "--tool-name"]
    upsert = _inspect(
        inspector, stdio_target, *call, "upsert_markdown", "--tool-arg", 'paths=["rules"]'
    )
    query = _inspect(
        inspector, stdio_target, *call, "query_directives", "--tool-arg", "task=design a REST API"
    )
    detect = _inspect(
        inspector, stdio_target, *call, "detect_context", "--tool-arg", "task=add a SQL migration"
    )
    resources = _inspect(inspector, stdio_target, "--method", "resources/list")
    assert not upsert.get("isError") and upsert["structuredContent"]["directives_added"] > 0
    assert not query.get("isError") and "MUST" in query["structuredContent"]["context_block"]
    assert detect["structuredContent"]["detected_layer"] == "4-Persistence"
    assert "memoir://rules/api-design" in [r["uri"] for r in resources["resources"]]


def test_the_inspector_reports_the_empty_graph_as_a_tool_error(
    inspector: Path, tmp_path: Path
) -> None:
    target = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", "--workspace", str(tmp_path))
    result = _inspect(
        inspector,
        target,
        "--method",
        "tools/call",
        "--tool-name",
        "query_directives",
        "--tool-arg",
        "task=add a form",
    )
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Knowledge graph is empty.")


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    server = start_http_server(tmp_path_factory.mktemp("inspector-http"), "http")
    yield server
    assert stop_http_server(server) == 0


def test_the_inspector_drives_the_streamable_http_server(
    inspector: Path, http_server: RunningServer
) -> None:
    target = [http_server.mcp_url, "--transport", "http"]
    tools = _inspect(inspector, target, "--method", "tools/list")
    detect = _inspect(
        inspector,
        target,
        "--method",
        "tools/call",
        "--tool-name",
        "detect_context",
        "--tool-arg",
        "task=deploy with Docker to Azure",
    )
    assert [t["name"] for t in tools["tools"]] == list(DEFAULT_TOOLS)
    assert detect["structuredContent"]["detected_layer"] == "7-Deployment"
