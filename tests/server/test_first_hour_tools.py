"""The knowledge tools as a newcomer meets them over MCP (issue 13): plain argument errors, the
agent's own categories, bounded ingest, sources in citations, and a provider that says why."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_testkit import ServerUnderTest

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("query", {}, "query: missing argument 'question'"),
        ("query", {"question": 5}, "query: 'question' must be a non-empty string, got 5"),
        (
            "ingest",
            {"txt": "notes"},
            "ingest: missing argument 'text'; unknown argument 'txt' (did you mean 'text'?)",
        ),
        (
            "query",
            {"question": "x", "stratgy": "wide_branch"},
            "query: unknown argument 'stratgy' (did you mean 'strategy'?)",
        ),
        (
            "query_directives",
            {"task": "x", "token_budget": "lots"},
            "query_directives: 'token_budget' must be an integer 50-8000, got 'lots'",
        ),
    ],
)
async def test_missing_or_mistyped_arguments_are_told_plainly(
    sut: ServerUnderTest, tmp_path: Path, tool: str, arguments: dict[str, object], said: str
) -> None:
    async with sut.client(tmp_path) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text
    assert text.splitlines()[0] == said
    assert "pydantic" not in text and "validation error" not in text
    error = result.structured_content["error"]
    assert error["code"] == "invalid_arguments" and error["hint"].startswith(f"{tool} takes ")


async def test_the_agent_files_knowledge_under_its_own_category_and_sources_are_cited(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    async with sut.client(tmp_path) as client:
        first = await client.call_tool(
            "ingest",
            {
                "text": "We deploy blue-green on Fridays after the smoke tests pass.",
                "source": "runbook.md",
                "category": "Ops / Deploys",
            },
        )
        again = await client.call_tool(
            "ingest",
            {"text": "Rollbacks flip the router back.", "category": "ops / deploy"},
        )
        answer = await client.call_tool("query", {"question": "when do we deploy?"})
    assert not first.is_error and first.structured_content["model"] == "agent-proposed"
    [path] = first.structured_content["categories"]
    assert path.startswith("Ops / Deploys / ")
    assert again.structured_content["categories"][0].startswith("Ops / Deploys / ")
    assert any("matched the existing 'Deploys'" in w for w in again.structured_content["warnings"])
    sources = answer.structured_content["sources"]
    assert any(s["source"] == "runbook.md" for s in sources)
    assert "(runbook.md)" in answer.content[0].text


async def test_an_ingest_over_the_size_limit_is_refused_with_the_setting(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path)
    settings = server.settings
    hierarchy = settings.hierarchy.model_copy(update={"max_ingest_bytes": 1000})
    server.runtime.settings = settings.model_copy(update={"hierarchy": hierarchy})
    try:
        async with server.client(tmp_path) as client:
            result = await client.call_tool("ingest", {"text": "Words about queues. " * 100})
    finally:
        await server.close()
    assert result.is_error
    error = result.structured_content["error"]
    assert "2,000 bytes" in error["message"] and "1,000 bytes" in error["message"]
    assert "hierarchy.max_ingest_bytes" in error["message"]
    assert error["details"]["setting"] == "hierarchy.max_ingest_bytes"


async def test_a_configured_provider_that_cannot_be_used_is_reported_in_every_result(
    tmp_path: Path,
) -> None:
    server = ServerUnderTest(tmp_path, llm={"model": "nosuchprovider:model-x"})
    try:
        async with server.client(tmp_path) as client:
            ingest = await client.call_tool("ingest", {"text": "Invoices are due in 30 days."})
            answer = await client.call_tool("query", {"question": "when are invoices due?"})
    finally:
        await server.close()
    for result in (ingest, answer):
        assert not result.is_error
        [warning] = [w for w in result.structured_content["warnings"] if "nosuchprovider" in w]
        assert "cannot be used" in warning and "offline model" in warning
        assert "nosuchprovider:model-x" in result.content[0].text  # the text says it too
