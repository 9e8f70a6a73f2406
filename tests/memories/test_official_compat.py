"""Compatibility mode, tested differentially: the same call sequence against the official
memory server (``@modelcontextprotocol/server-memory``, installed from npm by this set-up into
a cache folder the tests own) and against memoir gives the same answers and the same graph.

Known, documented difference: memoir lists relations ordered by (from, relationType, to), the
official server in insertion order, so relation lists are compared as sorted lists; and
``search_nodes`` may add hybrid-search hits after the official server's substring matches.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from server.mcp_app.app import build_server
from server.mcp_app.official_memory_tools import OFFICIAL_TOOLS
from server.mcp_app.runtime import MemoirRuntime
from server.mcp_app.scoping import ScopeDefaults

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

_PACKAGE = "@modelcontextprotocol/server-memory@2026.8.31"
_INSTALL_S = 600
_WAIT_S = 120


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memoir-tests" / "server-memory-2026.8.31"


@pytest.fixture(scope="module")
def official_server() -> Path:
    if shutil.which("npm") is None or shutil.which("node") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("npm/node are needed for the differential test of the compatibility mode")
        pytest.skip("npm/node are not installed: the official memory server cannot run here")
    folder = _cache_dir()
    entry = (
        folder / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    )
    if not entry.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), _PACKAGE],
            check=True,
            capture_output=True,
            timeout=_INSTALL_S,
        )
    return entry


# A session an agent might run: entities, relations (one to an entity that does not exist
# yet), observations, duplicates, deletions, an error, and the reads.
SEQUENCE: list[tuple[str, dict[str, Any]]] = [
    ("create_entities", {"entities": [
        {"name": "John_Smith", "entityType": "person", "observations": ["Speaks fluent Spanish"]},
        {"name": "Anthropic", "entityType": "organization", "observations": ["AI safety company"]},
        {"name": "memoir", "entityType": "project", "observations": []},
    ]}),
    ("create_relations", {"relations": [
        {"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
        {"from": "John_Smith", "to": "memoir", "relationType": "maintains"},
        {"from": "memoir", "to": "SQLite", "relationType": "stores_data_in"},
    ]}),
    ("create_relations", {"relations": [
        {"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    ]}),
    ("add_observations", {"observations": [
        {"entityName": "John_Smith", "contents": ["Prefers morning meetings", "Speaks fluent Spanish"]},
        {"entityName": "memoir", "contents": ["Written in Python", "Serves MCP over stdio"]},
    ]}),
    ("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}),
    ("create_entities", {"entities": [
        {"name": "John_Smith", "entityType": "person", "observations": ["duplicate, ignored"]},
        {"name": "SQLite", "entityType": "software", "observations": ["Embedded database"]},
    ]}),
    ("delete_observations", {"deletions": [
        {"entityName": "memoir", "observations": ["Serves MCP over stdio"]},
        {"entityName": "Nobody", "observations": ["x"]},
    ]}),
    ("delete_relations", {"relations": [
        {"from": "John_Smith", "to": "memoir", "relationType": "maintains"},
    ]}),
    ("read_graph", {}),
    ("open_nodes", {"names": ["John_Smith", "SQLite", "Ghost"]}),
    ("search_nodes", {"query": "spanish"}),
    ("search_nodes", {"query": "PYTHON"}),
    ("delete_entities", {"entityNames": ["Anthropic", "Ghost"]}),
    ("read_graph", {}),
]  # fmt: skip


def _normalised(tool: str, content: dict[str, Any] | None) -> Any:
    if content is None:
        return None
    out = json.loads(json.dumps(content))
    if "relations" in out and isinstance(out["relations"], list):
        out["relations"] = sorted(
            out["relations"], key=lambda r: (r["from"], r["relationType"], r["to"])
        )
    return out


async def _run(
    client: Client, sequence: list[tuple[str, dict[str, Any]]]
) -> list[tuple[bool, Any, str]]:
    answers = []
    for tool, arguments in sequence:
        result = await client.call_tool(tool, arguments)
        answers.append((bool(result.is_error), result.structured_content, result.content[0].text))
    return answers


async def test_the_same_call_sequence_gives_the_same_graph_as_the_official_server(
    official_server: Path, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=shutil.which("node") or "node",
        args=[str(official_server)],
        env={
            "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl"),
            "PATH": os.environ.get("PATH", ""),
        },
    )
    with anyio.fail_after(_WAIT_S):
        async with Client(params, mode="legacy") as client:
            official_tools = {t.name: t for t in (await client.list_tools()).tools}
            official = await _run(client, SEQUENCE)

    settings = load_settings(
        {"embedding": {"model": "hash:384"}, "memories": {"official_server_tools": True}},
        cwd=tmp_path, environ={},
    )  # fmt: skip
    runtime = MemoirRuntime(
        settings, f"sqlite:///{tmp_path / 'memoir.db'}",
        scope_defaults=ScopeDefaults(explicit_scope="graph-test"),
        embedder=create_embedder("hash:384"),
    )  # fmt: skip
    try:
        with anyio.fail_after(_WAIT_S):
            async with Client(build_server(runtime), mode="legacy") as client:
                ours_tools = {t.name: t for t in (await client.list_tools()).tools}
                ours = await _run(client, SEQUENCE)
    finally:
        await runtime.aclose()

    assert set(OFFICIAL_TOOLS) == set(official_tools) <= set(ours_tools)
    for name in OFFICIAL_TOOLS:
        theirs_in = official_tools[name].input_schema["properties"]
        ours_in = ours_tools[name].input_schema["properties"]
        assert set(ours_in) == set(theirs_in), name
        assert official_tools[name].annotations == ours_tools[name].annotations, name

    for (tool, arguments), theirs, mine in zip(SEQUENCE, official, ours, strict=True):
        assert mine[0] == theirs[0], (tool, arguments, mine, theirs)
        if theirs[0]:  # both errors: the same message
            assert mine[2] == theirs[2], (tool, mine[2], theirs[2])
            continue
        if tool == "search_nodes":
            names = [e["name"] for e in mine[1]["entities"]]
            expected = [e["name"] for e in theirs[1]["entities"]]
            assert names[: len(expected)] == expected, (arguments, names, expected)
            continue
        assert _normalised(tool, mine[1]) == _normalised(tool, theirs[1]), (tool, arguments)
        if tool in ("create_entities", "add_observations", "delete_entities"):
            assert mine[2] == theirs[2], tool  # the same text content

    final_official = _normalised("read_graph", official[-1][1])
    assert final_official == _normalised("read_graph", ours[-1][1])
    assert final_official["entities"]  # the comparison is not vacuous
