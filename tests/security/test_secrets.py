"""A corpus of fake credentials of every kind the redactor knows, put into a store through the
rules, the documents and the knowledge paths, then looked for on every surface: tool results,
resources, prompts, REST, CLI output (JSON and human), exports, category names, the run log,
and the server's and the CLI's logs at debug level with every library's debug lines on.

The values are random strings made for this test (no real credential, no vendor's published
example), fixed so that a failure is reproducible.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_testkit import RunningServer, server_env, start_http_server, stop_http_server
from trust_kit import Token, http_get, mcp_client, write_config

from memory_core.redaction import REDACTED_PREFIX, redact_text

pytestmark = pytest.mark.anyio

_WAIT_S = 60
_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"
_DEBUG = {"MEMOIR_LOGGING__LEVEL": "debug", "MEMOIR_LOGGING__LIBRARY_DEBUG": "true"}

# kind -> (line as it appears in a file, the secret value that must never come back out)
CORPUS: dict[str, tuple[str, str]] = {
    "aws_access_key_id": ("AWS access key AKIAG7PRQSE2T3ZZHQOU for prod.", "AKIAG7PRQSE2T3ZZHQOU"),
    "aws_secret_access_key": (
        'aws_secret_access_key = "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"',
        "wZqxZOOHjkJQQrkaPehMvbfrn2yzL7C5Mg3PR4hL",
    ),
    "github_token": (
        "CI uses ghp_LOOxl3gV3FGRmrCNnFZsGqgh0frrhbkVAhRH to push.",
        "ghp_LOOxl3gV3FGRmrCNnFZsGqgh0frrhbkVAhRH",
    ),
    "github_pat": (
        "PAT 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",
        "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",
    ),
    "api_key": (
        "OPENAI_KEY is sk-proj-oq3GqlpnMR6vsUW5xcJ6MV8YWkGP1mxFyp9yIJX6 today.",
        "sk-proj-oq3GqlpnMR6vsUW5xcJ6MV8YWkGP1mxFyp9yIJX6",
    ),
    "stripe_key": ("Billing: sk_live_uF68NcpP7BEXvfqZgimdS7jn", "sk_live_uF68NcpP7BEXvfqZgimdS7jn"),
    "slack_token": (
        "Bot xoxb-477286014586-AiCofjZUljbQ6oP3Q0w7MQ0J posts alerts.",
        "xoxb-477286014586-AiCofjZUljbQ6oP3Q0w7MQ0J",
    ),
    "google_api_key": (
        "Maps key AIzaTcKADr9Eu7e3xdRP7PI0g63eB1h3d1P7kea.",
        "AIzaTcKADr9Eu7e3xdRP7PI0g63eB1h3d1P7kea",
    ),
    "jwt": (
        "Session eyJhbGciOiJIUzI1NiJ9.eyJYRtciy4Lja4CDY3FTHbsfrpsRLPGaJ.YpUa7w5h2hzyCswU7vbqis9KZXTt9nHL15Cb5PeCvKy",
        "YpUa7w5h2hzyCswU7vbqis9KZXTt9nHL15Cb5PeCvKy",
    ),
    "private_key": (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        "YMBqRW9AmYby3TEpy0HhWo0pmq23epYfD3QJdbmRZRMPsXBDo5VeOeTTlTxDSmyg\n"
        "-----END RSA PRIVATE KEY-----",
        "YMBqRW9AmYby3TEpy0HhWo0pmq23epYfD3QJdbmRZRMPsXBDo5VeOeTTlTxDSmyg",
    ),
    "bearer_token": (
        "curl -H 'Authorization: Bearer MxEnWRwvFI1tdlNODi520rE5tIdjdHbRtFxOsxQ9'",
        "MxEnWRwvFI1tdlNODi520rE5tIdjdHbRtFxOsxQ9",
    ),
    "url_password": (
        "DATABASE_URL=postgres://deploy:Wq9x4Lo53t2zLELp2@db.internal/app",
        "Wq9x4Lo53t2zLELp2",
    ),
    "credential_assignment": ('db_password = "0MZwlwp23JOwv0!2"', "0MZwlwp23JOwv0!2"),
    "credential": ("API_KEY=HBhact35rktmZYmhG2", "HBhact35rktmZYmhG2"),
    "high_entropy": (
        "Recovery blob Vo7ysMChyXhCXMWZeT0I07pdLInIIWLymIfix3OE1hfX stored offline.",
        "Vo7ysMChyXhCXMWZeT0I07pdLInIIWLymIfix3OE1hfX",
    ),
}
NEEDLES = [needle for _, needle in CORPUS.values()]
BODY = "\n\n".join(line for line, _ in CORPUS.values())
# Text the redactor must leave alone (ids, hashes, paths, identifiers, placeholders).
BENIGN = [
    "commit 3f2a9c0d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f",
    "/work/wt/issue14-trust/tests/security/test_secrets.py",
    "ConfigurationManagerFactoryBuilder2024Version",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "set API_KEY=${API_KEY} or YOUR_API_KEY, never sk-...",
    "api-design#d3 and security-secrets",
]


def _leaks(text: str) -> list[str]:
    return [n for n in NEEDLES if n in text]


@pytest.mark.parametrize("kind", sorted(CORPUS))
def test_the_redactor_knows_every_kind_in_the_corpus(kind: str) -> None:
    line, needle = CORPUS[kind]
    redacted = redact_text(line)
    assert needle not in redacted and REDACTED_PREFIX in redacted


@pytest.mark.parametrize("text", BENIGN)
def test_the_redactor_leaves_ordinary_text_alone(text: str) -> None:
    assert redact_text(text) == text


def _rule_document() -> str:
    aws, github = CORPUS["aws_access_key_id"][1], CORPUS["github_token"][1]
    return f"""# Rule: Rotate {aws} quarterly

- **Layer**: 7-Deployment
- **Topics**: secrets

## Directives

- [MUST] Replace {github} in the CI settings before release.
- [SHOULD] Never paste {CORPUS["bearer_token"][0]} into tickets.
"""


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningServer, Token, Path, list[str]]]:
    root = tmp_path_factory.mktemp("secrets")
    project = root / "project"
    (project / "rules").mkdir(parents=True)
    (project / ".git").mkdir()
    (project / "rules" / "rotation.md").write_text(_rule_document())
    (project / "notes.md").write_text(BODY)
    token = Token.make("frank", project)
    config = write_config(root / "etc", tokens=(token,))
    cli_logs: list[str] = []
    for args in (("add", "notes.md"), ("rules", "upsert", "rules")):
        done = _cli(root, project, *args)
        assert done.returncode == 0, done.stderr
        cli_logs.append(done.stderr + done.stdout)
    server = start_http_server(root, "http", workspaces=(project,), config=config, env=dict(_DEBUG))
    try:
        yield server, token, project, cli_logs
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)


def _cli(root: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _ENTRY, "--db", f"sqlite:///{root / 'memoir.db'}", *args],
        cwd=cwd,
        env=server_env(**_DEBUG),
        capture_output=True,
        text=True,
        timeout=_WAIT_S,
    )


def _dump(value: Any) -> str:
    if hasattr(value, "model_dump"):
        return json.dumps(value.model_dump(mode="json"), ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


async def test_no_mcp_surface_returns_a_secret(
    store: tuple[RunningServer, Token, Path, list[str]],
) -> None:
    server, token, _, _ = store
    outputs: list[str] = []
    with anyio.fail_after(_WAIT_S):
        async with mcp_client(server.mcp_url, token=token.value) as client:
            saved = await client.call_tool("ingest", {"text": BODY, "source": "ops-notes"})
            assert not saved.is_error, saved.content[0].text
            outputs.append(_dump(saved))
            for task in ("rotate the AWS keys", f"use {CORPUS['stripe_key'][1]} for billing"):
                outputs.append(_dump(await client.call_tool("query_directives", {"task": task})))
            outputs.append(
                _dump(await client.call_tool("query", {"question": "which keys exist?"}))
            )
            outputs.append(_dump(await client.call_tool("detect_context", {"task": BODY[:500]})))
            resources = await client.list_resources()
            outputs.append(_dump(resources))
            for resource in resources.resources:
                outputs.append(_dump(await client.read_resource(str(resource.uri))))
            outputs.append(_dump(await client.read_resource("memoir://store/summary")))
            prompt = await client.get_prompt("start_coding_session", {"task": "rotate keys"})
            outputs.append(_dump(prompt))
            outputs.append(_dump(await client.get_prompt("save_knowledge", {"topic": BODY[:300]})))
    joined = "\n".join(outputs)
    assert not _leaks(joined)
    assert REDACTED_PREFIX in joined  # the secrets were there, and were replaced


def test_no_rest_route_returns_a_secret(
    store: tuple[RunningServer, Token, Path, list[str]],
) -> None:
    server, token, _, _ = store
    answers = [
        http_get(f"{server.base}/healthz"),
        http_get(f"{server.base}/v1/whoami", {"Authorization": f"Bearer {token.value}"}),
    ]
    assert all(a.status == 200 for a in answers)
    assert not _leaks("\n".join(a.body for a in answers))
    assert token.value not in "".join(server.stderr)


def test_no_cli_output_or_export_shows_a_secret(
    store: tuple[RunningServer, Token, Path, list[str]],
) -> None:
    _, _, project, cli_logs = store
    root = project.parent
    outputs = list(cli_logs)
    for args in (
        ("search", "AWS access key", "--json"),
        ("search", "recovery blob"),
        ("query", "--rql", "SELECT chunk.text, doc.path FROM chunk", "--json"),
        ("context", "which keys", "--json"),
        ("rules", "query", "rotate the keys"),
        ("rules", "show", "rotation"),
        ("categories", "--tree"),
        ("runs", "--json"),
        ("rules", "runs", "--json"),
        ("export",),
        ("export", "--out", str(root / "backup.jsonl")),
    ):
        done = _cli(root, project, *args)
        assert done.returncode in (0, 3), (args, done.stderr[-2000:])
        outputs.append(done.stdout + done.stderr)
    exported = (root / "backup.jsonl").read_text()
    assert (root / "backup.jsonl").stat().st_mode & 0o777 == 0o600
    assert not _leaks(exported) and REDACTED_PREFIX in exported
    # The backup still restores (vectors untouched by the redaction) and answers searches.
    restored = root / "restored"
    restored.mkdir()
    (restored / ".git").mkdir()
    done = _cli(restored, project, "import", str(root / "backup.jsonl"))
    assert done.returncode == 0, done.stderr[-2000:]
    found = _cli(restored, project, "search", "recovery blob", "--json")
    assert "Recovery blob" in found.stdout and not _leaks(found.stdout)
    joined = "\n".join(outputs)
    assert not _leaks(joined)
    assert REDACTED_PREFIX in joined


def test_no_log_line_at_debug_level_holds_a_secret(
    store: tuple[RunningServer, Token, Path, list[str]],
) -> None:
    server, _, _, cli_logs = store
    server_log = "".join(server.stderr)
    assert "[debug" in server_log or '"level": "debug"' in server_log  # debug really was on
    assert not _leaks(server_log)
    assert not _leaks("\n".join(cli_logs))


def test_the_run_log_keeps_no_secret(store: tuple[RunningServer, Token, Path, list[str]]) -> None:
    _, _, project, _ = store
    with sqlite3.connect(project.parent / "memoir.db") as conn:
        payloads = [str(row[0]) for row in conn.execute("SELECT payload FROM run")]
    assert payloads  # the queries above were recorded
    assert not _leaks("\n".join(payloads))
