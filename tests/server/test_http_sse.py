"""``memoir serve --transport http|sse`` as real subprocesses on a loopback port, driven by the
SDK's streamable-HTTP and SSE clients. One server process per transport for the whole module."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp_testkit import (
    RunningServer,
    make_project,
    roots_callback,
    start_http_server,
    stop_http_server,
)

from memory_core.errors import EmptyKnowledgeGraphError
from server.mcp_app.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

_WAIT_S = 60


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    server = start_http_server(tmp_path_factory.mktemp("http"), "http")
    yield server
    assert stop_http_server(server) == 0, "".join(server.stderr)


@pytest.fixture(scope="module")
def sse_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    server = start_http_server(tmp_path_factory.mktemp("sse"), "sse")
    yield server
    assert stop_http_server(server) == 0, "".join(server.stderr)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_http_client_lists_and_calls_every_tool(
    http_server: RunningServer, tmp_path: Path, mode: str
) -> None:
    project = make_project(tmp_path / "proj")
    with anyio.fail_after(_WAIT_S):
        async with Client(
            http_server.mcp_url, mode=mode, list_roots_callback=roots_callback(project)
        ) as client:
            tools = await client.list_tools()
            upsert = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
            query = await client.call_tool("query_directives", {"task": "add a REST endpoint"})
            detect = await client.call_tool("detect_context", {"task": "add a Docker image"})
            ingest = await client.call_tool("ingest", {"text": "The API gateway is Envoy."})
            answer = await client.call_tool("query", {"question": "which API gateway?"})
    assert [t.name for t in tools.tools] == list(DEFAULT_TOOLS)
    for result in (upsert, query, detect, ingest, answer):
        assert not result.is_error, result.content[0].text
    assert detect.structured_content["detected_layer"] == "7-Deployment"
    assert "Envoy" in answer.structured_content["answer"]


async def test_http_roots_keep_projects_apart(http_server: RunningServer, tmp_path: Path) -> None:
    alpha = make_project(tmp_path / "alpha", rules=("api-design.md",))
    beta = tmp_path / "beta"
    beta.mkdir()
    with anyio.fail_after(_WAIT_S):
        async with Client(
            http_server.mcp_url, mode="legacy", list_roots_callback=roots_callback(alpha)
        ) as client:
            await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        async with Client(
            http_server.mcp_url, mode="legacy", list_roots_callback=roots_callback(beta)
        ) as client:
            seen_by_beta = await client.call_tool("query_directives", {"task": "design an API"})
    assert seen_by_beta.is_error
    assert seen_by_beta.content[0].text.startswith(EmptyKnowledgeGraphError.SPEC_MESSAGE)


async def test_ten_concurrent_http_clients_all_succeed(
    http_server: RunningServer, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "proj")
    outcomes: list[bool] = []
    with anyio.fail_after(_WAIT_S):
        async with Client(
            http_server.mcp_url, mode="legacy", list_roots_callback=roots_callback(project)
        ) as client:
            await client.call_tool("upsert_markdown", {"paths": ["rules"]})

        async def one(i: int) -> None:
            async with Client(
                http_server.mcp_url, mode="legacy", list_roots_callback=roots_callback(project)
            ) as c:
                r = await c.call_tool("query_directives", {"task": f"endpoint {i} storing a token"})
                outcomes.append(not r.is_error)

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(one, i)
    assert outcomes == [True] * 10


def test_the_health_route_reports_an_open_store(http_server: RunningServer) -> None:
    with urllib.request.urlopen(f"{http_server.base}/healthz", timeout=_WAIT_S) as response:
        body: dict[str, Any] = json.loads(response.read())
    assert body["ok"] is True


def test_print_config_shows_the_http_url_and_snippet(http_server: RunningServer) -> None:
    text = "".join(http_server.stderr)
    assert '"type": "http"' in text
    assert "claude mcp add --transport http memoir" in text


async def test_sse_client_lists_tools_and_queries_directives(
    sse_server: RunningServer, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    with anyio.fail_after(_WAIT_S):
        async with Client(
            sse_client(sse_server.sse_url),
            mode="legacy",
            list_roots_callback=roots_callback(project),
        ) as client:
            tools = await client.list_tools()
            upsert = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
            query = await client.call_tool("query_directives", {"task": "version a REST API"})
            prompts = await client.list_prompts()
    assert [t.name for t in tools.tools] == list(DEFAULT_TOOLS)
    assert not upsert.is_error and not query.is_error
    assert "MUST" in query.structured_content["context_block"]
    assert {p.name for p in prompts.prompts} == {"start_coding_session", "save_knowledge"}
