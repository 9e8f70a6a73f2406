"""Long ingests over real stdio: progress notifications for a client that sent a
progressToken, and a background job with a status resource above the size threshold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_testkit import serve_command, server_env

pytestmark = pytest.mark.anyio
_WAIT_S = 120


def _text(paragraphs: int) -> str:
    return "\n\n".join(
        f"Paragraph {i} is about replica {i % 7} lag and vacuum of table t{i}. " * 6
        for i in range(paragraphs)
    )


def _params(tmp_path: Path, **env: str) -> StdioServerParameters:
    command = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", "--workspace", str(tmp_path))
    return StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=server_env(MEMOIR_HIERARCHY__INGEST_BATCH_BYTES="4096", **env),
        cwd=str(tmp_path),
    )


async def test_a_streamed_ingest_sends_progress_notifications(tmp_path: Path) -> None:
    text = _text(100)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(_WAIT_S):
        async with Client(
            _params(tmp_path, MEMOIR_HIERARCHY__BACKGROUND_INGEST_BYTES="10000000"),
            mode="legacy",
        ) as client:
            result = await client.call_tool(
                "ingest", {"text": text, "source": "notes"}, progress_callback=on_progress
            )
    assert not result.is_error, result.content
    size = len(text.encode())
    assert len(seen) >= 5
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)
    assert seen[-1][0] == seen[-1][1] == size
    assert "chunks in" in (seen[-1][2] or "")
    assert result.structured_content is not None and result.structured_content["stored"] > 10


async def test_a_large_ingest_returns_a_job_whose_resource_reports_the_result(
    tmp_path: Path,
) -> None:
    text = _text(100)
    with anyio.fail_after(_WAIT_S):
        async with Client(
            _params(tmp_path, MEMOIR_HIERARCHY__BACKGROUND_INGEST_BYTES="10000"),
            mode="legacy",
        ) as client:
            started = await client.call_tool("ingest", {"text": text, "source": "notes"})
            assert not started.is_error, started.content
            out = started.structured_content or {}
            assert out["stored"] == 0 and "memoir://jobs/" in out["warnings"][0]
            uri = "memoir://jobs/" + out["warnings"][0].split("memoir://jobs/")[1].split()[0]
            job: dict[str, Any] = {}
            while job.get("status") in (None, "running"):
                read = await client.read_resource(uri)
                job = json.loads(read.contents[0].text)  # type: ignore[union-attr]
                if job["status"] == "running":
                    await anyio.sleep(0.05)
            with pytest.raises(Exception, match="no ingest job 'nope'"):
                await client.read_resource("memoir://jobs/nope")
    assert job["status"] == "done", job
    assert job["progress"]["bytes_done"] == job["progress"]["bytes_total"] == len(text.encode())
    assert job["result"]["stored"] == job["result"]["stream"]["new_chunks"] > 10
