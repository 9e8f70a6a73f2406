"""A shared HTTP server for two projects, as a team runs it: every caller authenticates, each
token maps to the projects it may use, and no caller reaches another project's data through any
tool, resource, prompt or REST route, whatever roots it claims.

One server process for the module (streamable HTTP, with the extra tools), configured by a
``memoir.toml`` that holds only token hashes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_testkit import RunningServer, start_http_server, stop_http_server
from trust_kit import Token, git_project, http_get, mcp_client, write_config

pytestmark = pytest.mark.anyio

_WAIT_S = 60
BETA_FACT = "The beta launch code name is Quasar Lantern."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Team:
    def __init__(self, root: Path) -> None:
        self.alpha = git_project(root / "alpha", rules=("api-design.md",))
        self.beta = git_project(root / "beta", rules=("security-secrets.md",))
        self.outside = root / "outside"
        self.outside.mkdir()
        (self.outside / "AGENTS.md").write_text("- Always deploy with the skeleton key.\n")
        self.alice = Token.make("alice", self.alpha)
        self.bob = Token.make("bob", self.beta)
        self.carol = Token.make("carol")  # every workspace of the server
        self.expired = Token.make("old", self.alpha, expires="2020-01-01T00:00:00Z")
        self.config = write_config(
            root / "etc",
            tokens=(self.alice, self.bob, self.carol, self.expired),
            extra="[server]\nextra_tools = true",
        )


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Team, RunningServer]]:
    root = tmp_path_factory.mktemp("team")
    team = Team(root)
    server = start_http_server(root, "http", workspaces=(team.alpha, team.beta), config=team.config)
    try:
        anyio.run(_load, team, server)
        yield team, server
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)


async def _load(team: Team, server: RunningServer) -> None:
    with anyio.fail_after(_WAIT_S):
        async with mcp_client(server.mcp_url, token=team.alice.value) as client:
            loaded = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
            assert not loaded.is_error, loaded.content[0].text
        async with mcp_client(server.mcp_url, token=team.bob.value) as client:
            loaded = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
            assert not loaded.is_error, loaded.content[0].text
            saved = await client.call_tool("ingest", {"text": BETA_FACT})
            assert not saved.is_error, saved.content[0].text


def _everything(result: Any) -> str:
    return repr(result.model_dump()) if hasattr(result, "model_dump") else repr(result)


@pytest.mark.parametrize("header", [None, "Bearer nope", "Basic YWxpY2U6cHc=", "Bearer "])
def test_mcp_without_a_valid_token_is_refused_with_401(
    team: tuple[Team, RunningServer], header: str | None
) -> None:
    _, server = team
    headers = {"Accept": "application/json, text/event-stream"}
    if header is not None:
        headers["Authorization"] = header
    answer = http_get(server.mcp_url, headers, method="POST")
    assert answer.status == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_an_expired_token_is_refused(team: tuple[Team, RunningServer]) -> None:
    t, server = team
    answer = http_get(server.mcp_url, {"Authorization": f"Bearer {t.expired.value}"}, "POST")
    assert answer.status == 401


def test_rest_routes_need_a_token_and_health_does_not(team: tuple[Team, RunningServer]) -> None:
    t, server = team
    assert http_get(f"{server.base}/v1/whoami").status == 401
    assert http_get(f"{server.base}/v1/whoami", {"Authorization": "Bearer x"}).status == 401
    me = http_get(f"{server.base}/v1/whoami", {"Authorization": f"Bearer {t.alice.value}"})
    assert me.status == 200
    assert me.json() == {
        "principal": "alice",
        "workspaces": [str(t.alpha)],
        "scope": f"project:{t.alpha}",
        "scope_source": "workspace",
    }
    health = http_get(f"{server.base}/healthz")
    assert health.status == 200 and health.json()["store"] == "ok"


def test_the_config_file_holds_hashes_never_tokens(team: tuple[Team, RunningServer]) -> None:
    t, _ = team
    text = t.config.read_text()
    for token in (t.alice, t.bob, t.carol):
        assert token.value not in text
        assert "sha256" in text


async def test_a_token_reads_only_its_own_project_whatever_roots_it_claims(
    team: tuple[Team, RunningServer],
) -> None:
    t, server = team
    with anyio.fail_after(_WAIT_S):
        # alice claims beta's root, then the file system root: neither widens her grant.
        for roots in ((t.beta,), (Path("/"),), ()):
            async with mcp_client(server.mcp_url, token=t.alice.value, roots=roots) as client:
                answer = await client.call_tool(
                    "query_directives", {"task": "store a database password and an API secret"}
                )
                rules = await client.call_tool("list_rules", {})
                found = await client.call_tool(
                    "query", {"question": "what is the launch code name?"}
                )
                searched = await client.call_tool("search", {"text": "Quasar Lantern"})
                detected = await client.call_tool("detect_context", {"task": "rotate secrets"})
            for result in (answer, rules, searched, detected):
                assert not result.is_error, result.content[0].text
            # alpha has no knowledge: the answer is "nothing ingested in alpha", not beta's fact.
            assert found.is_error and str(t.alpha) in found.content[0].text
            assert answer.meta["io.memoir/scope"] == f"project:{t.alpha}"
            assert {c["rule_id"] for c in answer.structured_content["citations"]} <= {"api-design"}
            assert [r["rule_id"] for r in rules.structured_content["rules"]] == ["api-design"]
            assert "Quasar" not in _everything(found) and "Quasar" not in _everything(searched)
            assert detected.meta["io.memoir/scope"] == f"project:{t.alpha}"
            if roots == (t.beta,):
                assert "ignored MCP roots" in answer.content[-1].text


async def test_resources_and_prompts_stay_in_the_callers_project(
    team: tuple[Team, RunningServer],
) -> None:
    t, server = team
    with anyio.fail_after(_WAIT_S):
        async with mcp_client(server.mcp_url, token=t.alice.value, roots=(t.beta,)) as client:
            listed = await client.list_resources()
            with pytest.raises(MCPError):
                await client.read_resource("memoir://rules/security-secrets")
            own = await client.read_resource("memoir://rules/api-design")
            categories = await client.read_resource("memoir://categories")
            prompt = await client.get_prompt(
                "start_coding_session", {"task": "keep the API keys secret"}
            )
    uris = {str(r.uri) for r in listed.resources}
    assert "memoir://rules/api-design" in uris and "memoir://rules/security-secrets" not in uris
    assert "HTTP API Design" in _everything(own)
    assert "Quasar" not in _everything(categories)
    assert "Secrets Management" not in _everything(
        prompt
    ) and "security-secrets" not in _everything(prompt)


async def test_writes_cannot_read_files_outside_the_tokens_project(
    team: tuple[Team, RunningServer],
) -> None:
    t, server = team
    hostile = [
        str(t.beta / "rules" / "security-secrets.md"),
        "../beta/rules/security-secrets.md",
        str(t.outside / "AGENTS.md"),
        "/etc/passwd",
    ]
    with anyio.fail_after(_WAIT_S):
        async with mcp_client(server.mcp_url, token=t.alice.value, roots=(Path("/"),)) as client:
            for path in hostile:
                result = await client.call_tool("upsert_markdown", {"paths": [path]})
                assert result.is_error, path
                assert "outside the allowed roots" in result.content[0].text
            rules = await client.call_tool("list_rules", {})
    assert [r["rule_id"] for r in rules.structured_content["rules"]] == ["api-design"]


async def test_a_token_for_every_workspace_narrows_with_roots(
    team: tuple[Team, RunningServer],
) -> None:
    t, server = team
    with anyio.fail_after(_WAIT_S):
        async with mcp_client(server.mcp_url, token=t.carol.value, roots=(t.beta,)) as client:
            rules = await client.call_tool("list_rules", {})
            outside = await client.call_tool(
                "upsert_markdown", {"paths": [str(t.outside / "AGENTS.md")]}
            )
    assert rules.meta["io.memoir/scope"] == f"project:{t.beta}"
    assert [r["rule_id"] for r in rules.structured_content["rules"]] == ["security-secrets"]
    assert outside.is_error


async def test_sse_takes_the_same_tokens(tmp_path: Path) -> None:
    project = git_project(tmp_path / "proj")
    token = Token.make("dana", project)
    config = write_config(tmp_path / "etc", tokens=(token,))
    server = start_http_server(tmp_path, "sse", workspaces=(project,), config=config)
    try:
        assert http_get(server.sse_url).status == 401
        with anyio.fail_after(_WAIT_S):
            async with mcp_client(server.sse_url, token=token.value, sse=True) as client:
                result = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
        assert not result.is_error, result.content[0].text
        assert result.meta["io.memoir/scope"] == f"project:{project}"
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)
