"""The MCP tools ``ingest`` / ``query`` on SQLite, PostgreSQL and MySQL/MariaDB.

The real server object (``build_server``) with the SDK's in-process client; the project scope
comes from the client's MCP roots (a fresh tmp folder, so every run has its own scope). The
offline model answers (the client offers no sampling here).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.scope import project_scope

try:
    from conftest_backends import BACKENDS, anyio_backend, backend_url, require_service
except ImportError:  # pragma: no cover - tests/hierarchy became a package
    from hierarchy.conftest_backends import (  # type: ignore[no-redef]
        BACKENDS,
        anyio_backend,
        backend_url,
        require_service,
    )

__all__ = ["anyio_backend"]

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", BACKENDS)]

ALICE = (Path(__file__).parent.parent / "data" / "alice_chapter1.txt").read_text(encoding="utf-8")


@pytest.fixture
async def mcp_server(backend: str, tmp_path: Path) -> AsyncIterator[tuple[Any, Path]]:
    """(server app, project folder) over ``backend``; the project's rows are deleted after."""
    require_service(backend)
    pytest.importorskip("mcp")
    from server.mcp_app.app import build_server
    from server.mcp_app.runtime import MemoirRuntime
    from server.mcp_app.scoping import ScopeDefaults

    project = tmp_path / "project"
    project.mkdir()
    settings = load_settings(
        {"embedding": {"model": "hash:384"}, "hierarchy": {"min_chunk_chars": 400}},
        cwd=tmp_path,
        environ={},
    )
    runtime = MemoirRuntime(
        settings,
        backend_url(backend, tmp_path),
        embedder=create_embedder("hash:384"),
        scope_defaults=ScopeDefaults(workspace=project),  # the server may serve this project
    )
    try:
        yield build_server(runtime), project
    finally:
        memoir = await runtime.memoir()
        store = await memoir.hierarchy.store()
        if hasattr(store, "delete_scope"):
            await store.delete_scope(project_scope(project))
        await memoir.hierarchy.close()
        await runtime.aclose()


def _client(app: Any, project: Path) -> Any:
    from mcp import Client
    from mcp_types import ListRootsResult, Root

    async def list_roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=project.as_uri())])

    return Client(app, mode="legacy", list_roots_callback=list_roots)


async def test_the_mcp_tools_ingest_and_answer_on_every_backend(
    backend: str, mcp_server: tuple[Any, Path]
) -> None:
    app, project = mcp_server
    async with _client(app, project) as client:
        ingest = await client.call_tool("ingest", {"text": ALICE, "source": "alice.txt"})
        assert not ingest.is_error, ingest.content[0].text
        stored = ingest.structured_content
        assert stored["engine"] == "hierarchy" and stored["stored"] >= 5
        assert all(len(path.split(" / ")) == 3 for path in stored["categories"])

        again = await client.call_tool("ingest", {"text": ALICE, "source": "alice.txt"})
        assert not again.is_error and again.structured_content["stored"] == 0

        for strategy in ("one_shot", "wide_branch", "zoom_in", "branch_out"):
            answer = await client.call_tool(
                "query",
                {"question": "What was written on the little bottle?", "strategy": strategy},
            )
            assert not answer.is_error, answer.content[0].text
            out = answer.structured_content
            assert out["engine"] == "hierarchy" and out["answer"] and out["sources"]
