"""The five tools through the SDK's client, in-process, over a real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_testkit import ServerUnderTest, make_project
from mcp_types import INVALID_PARAMS, ListRootsResult, Root

from memory_core.errors import EmptyKnowledgeGraphError
from server.mcp_app.scoping import ScopeDefaults
from server.mcp_app.tools import DEFAULT_TOOLS

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:The roots capability is deprecated"),
]


async def _schemas(client: Client) -> dict[str, dict[str, Any]]:
    tools = await client.list_tools()
    return {t.name: t.output_schema or {} for t in tools.tools}


def _check(result: Any, schema: dict[str, Any]) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    jsonschema.validate(result.structured_content, schema)
    return dict(result.structured_content)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_tool_answers_with_structured_content_matching_its_output_schema(
    sut: ServerUnderTest, tmp_path: Path, mode: str
) -> None:
    project = make_project(tmp_path / "proj")
    async with sut.client(project, mode=mode) as client:
        schemas = await _schemas(client)
        assert set(DEFAULT_TOOLS) == set(schemas)

        upsert = _check(
            await client.call_tool("upsert_markdown", {"paths": ["rules"]}),
            schemas["upsert_markdown"],
        )
        assert upsert["documents_processed"] == 2 and upsert["directives_added"] > 0

        query = _check(
            await client.call_tool(
                "query_directives", {"task": "add a REST endpoint that stores an API key"}
            ),
            schemas["query_directives"],
        )
        assert "MUST" in query["context_block"]
        assert query["citations"] and query["diagnostics"]["retrieval_stats"]["selected"] > 0

        detect = _check(
            await client.call_tool(
                "detect_context", {"task": "write a SQL migration", "return_keywords": True}
            ),
            schemas["detect_context"],
        )
        assert detect["detected_layer"] == "4-Persistence" and detect["keywords"]

        ingest = _check(
            await client.call_tool(
                "ingest", {"text": "We deploy with blue-green switches on Fridays only."}
            ),
            schemas["ingest"],
        )
        assert ingest["stored"] == 1 and ingest["categories"]

        answer = _check(
            await client.call_tool("query", {"question": "when do we deploy?"}),
            schemas["query"],
        )
        assert "Fridays" in answer["answer"] and answer["sources"]


async def test_text_content_is_the_context_block_with_a_diagnostics_footer(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "proj")
    async with sut.client(project) as client:
        await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        result = await client.call_tool("query_directives", {"task": "design a REST API"})
    text = result.content[0].text
    assert text.startswith(result.structured_content["context_block"].rstrip())
    assert "[memoir: layer" in text and "tokens" in text


async def test_an_empty_graph_is_a_tool_error_with_the_specs_exact_message(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    async with sut.client(tmp_path) as client:
        result = await client.call_tool("query_directives", {"task": "add a login form"})
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert result.is_error
    assert result.content[0].text.startswith(EmptyKnowledgeGraphError.SPEC_MESSAGE)
    assert result.structured_content["error"]["code"] == "empty_knowledge_graph"
    assert "upsert" in result.structured_content["error"]["hint"]
    # It names a tool this client can call, and says it once (the hint adds, not repeats).
    named = EmptyKnowledgeGraphError.SPEC_MESSAGE.rstrip(".").split()[-1]
    assert named == "upsert_markdown" and named in tools
    assert named not in result.structured_content["error"]["hint"]


async def test_invalid_arguments_are_reported_as_errors_not_success(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    async with sut.client(tmp_path) as client:
        empty_task = await client.call_tool("detect_context", {"task": "   "})
        bad_budget = await client.call_tool("query_directives", {"task": "x", "token_budget": -5})
        no_paths = await client.call_tool("upsert_markdown", {"paths": []})
    assert empty_task.is_error and "task" in empty_task.content[0].text.lower()
    assert bad_budget.is_error and "token_budget" in bad_budget.content[0].text
    assert no_paths.is_error


async def test_a_missing_rule_file_is_reported_per_document_and_the_rest_is_ingested(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    async with sut.client(project) as client:
        result = await client.call_tool(
            "upsert_markdown", {"paths": ["rules/api-design.md", "rules/nope.md"]}
        )
    out = result.structured_content
    assert not result.is_error
    assert out["documents_processed"] >= 1 and out["directives_added"] > 0
    failed = [d for d in out["documents"] if d["status"] == "failed"]
    assert failed and "nope.md" in failed[0]["path"] and failed[0]["error"]


async def test_a_path_outside_the_project_is_refused(sut: ServerUnderTest, tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    outside = tmp_path / "elsewhere.md"
    outside.write_text((project / "rules" / "api-design.md").read_text())
    async with sut.client(project) as client:
        result = await client.call_tool("upsert_markdown", {"paths": ["../elsewhere.md"]})
    # Every path refused: an error the model reads, never a success with zero counts.
    assert result.is_error
    assert "no rule document was loaded" in result.content[0].text
    assert "outside the allowed roots" in result.content[0].text


async def test_upsert_accepts_document_text_for_servers_that_cannot_read_the_clients_files(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    text = (make_project(tmp_path / "src") / "rules" / "api-design.md").read_text()
    async with sut.client(tmp_path / "proj") as client:
        result = await client.call_tool(
            "upsert_markdown", {"paths": ["rules/api.md"], "text": text}
        )
        query = await client.call_tool("query_directives", {"task": "version a REST API"})
    assert result.structured_content["directives_added"] > 0
    assert not query.is_error


async def test_two_projects_on_one_store_never_see_each_others_rules(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    alpha = make_project(tmp_path / "alpha", rules=("api-design.md",))
    beta = tmp_path / "beta"
    beta.mkdir()
    async with sut.client(alpha) as client:
        await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        seen_by_alpha = await client.call_tool("query_directives", {"task": "design a REST API"})
    async with sut.client(beta) as client:
        seen_by_beta = await client.call_tool("query_directives", {"task": "design a REST API"})
        resources = await client.list_resources()
    assert not seen_by_alpha.is_error
    assert seen_by_beta.is_error
    assert seen_by_beta.content[0].text.startswith(EmptyKnowledgeGraphError.SPEC_MESSAGE)
    assert not [r for r in resources.resources if str(r.uri).startswith("memoir://rules/")]


async def test_writes_without_any_scope_are_refused(tmp_path: Path) -> None:
    # No workspace, no git root, and roots that cannot widen anything: the server must not guess.
    sut = ServerUnderTest(tmp_path, scope_defaults=ScopeDefaults())
    try:
        async with sut.client(tmp_path) as client:
            result = await client.call_tool("ingest", {"text": "a fact worth keeping"})
    finally:
        await sut.close()
    assert result.is_error
    assert result.meta["io.memoir/scope"] is None
    assert "no project scope" in result.content[0].text
    assert "--workspace" in result.content[0].text


async def test_ten_parallel_calls_all_succeed(sut: ServerUnderTest, tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    results: list[Any] = []
    async with sut.client(project) as client:
        await client.call_tool("upsert_markdown", {"paths": ["rules"]})

        async def one(i: int) -> None:
            task = f"add endpoint number {i} that reads a secret"
            results.append(await client.call_tool("query_directives", {"task": task}))

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(one, i)
    assert len(results) == 10
    assert all(not r.is_error for r in results)


async def test_a_client_over_its_rate_gets_a_429_error_with_retry_after(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path, rate_limit_per_minute=6)  # burst of 10
    try:
        async with server.client(tmp_path) as client:
            results = [
                await client.call_tool("detect_context", {"task": "add a form"}) for _ in range(11)
            ]
    finally:
        await server.close()
    assert all(not r.is_error for r in results[:10])
    limited = results[10]
    assert limited.is_error and "429" in limited.content[0].text
    assert limited.structured_content["error"]["details"]["retry_after"] > 0
    assert "retry after" in limited.content[0].text


async def test_a_timed_out_query_returns_a_partial_result_with_a_warning(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path, call_timeout_s=1e-9)
    project = make_project(tmp_path / "proj")
    try:
        async with server.client(project) as client:
            await client.call_tool("upsert_markdown", {"paths": ["rules"]})  # writes: no timeout
            result = await client.call_tool("query_directives", {"task": "write a SQL query"})
    finally:
        await server.close()
    assert not result.is_error
    diagnostics = result.structured_content["diagnostics"]
    assert diagnostics["partial"] is True
    assert diagnostics["detected_layer"] == "4-Persistence"
    assert "timed out" in diagnostics["warnings"][0]
    assert "timed out" in result.content[0].text


async def test_a_corrupt_database_answers_with_recovery_steps_and_the_server_keeps_running(
    tmp_path: Path,
) -> None:
    (tmp_path / "memoir.db").write_bytes(b"this is not a database" * 400)
    server = ServerUnderTest(tmp_path)
    try:
        async with server.client(tmp_path) as client:
            broken = await client.call_tool("detect_context", {"task": "add a form"})
            still_listed = await client.list_tools()
            (tmp_path / "memoir.db").unlink()  # the user follows the hint and starts afresh
            repaired = await client.call_tool("detect_context", {"task": "add a form"})
    finally:
        await server.close()
    assert broken.is_error
    assert "Hint:" in broken.content[0].text
    assert broken.structured_content["error"]["code"].startswith("database")
    assert len(still_listed.tools) == len(DEFAULT_TOOLS)
    assert not repaired.is_error


async def test_the_extra_tools_list_rules_and_search_documents(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path, extra_tools=True)
    project = make_project(tmp_path / "proj", rules=("api-design.md",))
    try:
        async with server.client(project) as client:
            await client.call_tool("upsert_markdown", {"paths": ["rules"]})
            rules = await client.call_tool("list_rules", {})
            found = await client.call_tool("search", {"text": "pagination cursors"})
    finally:
        await server.close()
    assert [r["rule_id"] for r in rules.structured_content["rules"]] == ["api-design"]
    assert not found.is_error and found.structured_content["engine"] == "documents"


async def test_an_unknown_tool_is_a_protocol_error_not_a_tool_result(sut: ServerUnderTest) -> None:
    async with sut.client() as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("memory.rules.query_directives", {"task": "x"})
    assert caught.value.error.code == INVALID_PARAMS
    assert "query_directives" in str(caught.value.error.data)


async def test_roots_are_asked_once_per_connection_until_the_client_announces_a_change(
    sut: ServerUnderTest, tmp_path: Path
) -> None:
    alpha = make_project(tmp_path / "alpha", rules=("api-design.md",))
    beta = tmp_path / "beta"
    beta.mkdir()
    current = [alpha]
    asked: list[Path] = []

    async def list_roots(_ctx: Any) -> ListRootsResult:
        asked.append(current[0])
        return ListRootsResult(roots=[Root(uri=current[0].as_uri())])

    async with sut.client(list_roots_callback=list_roots) as client:
        await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        in_alpha = await client.call_tool("query_directives", {"task": "design a REST API"})
        await client.call_tool("detect_context", {"task": "add a form"})
        current[0] = beta
        await client.send_roots_list_changed()
        in_beta = await client.call_tool("query_directives", {"task": "design a REST API"})
    assert asked == [alpha, beta]
    assert not in_alpha.is_error
    assert in_beta.is_error and "Knowledge graph is empty" in in_beta.content[0].text
