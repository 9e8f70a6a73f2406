"""``memoir rules …`` through click (in process) and once as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from server.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def _run(project: Path, *args: str, input: str | None = None) -> tuple[int, str, str]:
    runner = CliRunner()
    db = f"sqlite:///{project / 'cli.db'}"
    env = {"MEMOIR_EMBEDDING__MODEL": "hash:384"}
    cwd = os.getcwd()
    os.chdir(project)  # default allowed root = project root of the working directory
    try:
        result = runner.invoke(cli, ["--db", db, *args], input=input, env=env)
    finally:
        os.chdir(cwd)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def ingested(project: Path) -> Path:
    code, out, _ = _run(project, "rules", "upsert", "rules", "--scope", "s", "--json")
    assert code == 0, out
    return project


def test_upsert_json_reports_statistics(project: Path) -> None:
    code, out, _ = _run(project, "rules", "upsert", "rules", "--scope", "s", "--json")
    body = json.loads(out)
    assert code == 0 and body["ok"]
    assert body["rules_upserted"] == 4
    assert body["directives_added"] == 9
    for key in ("sections_created", "patterns_extracted", "relations_established", "warnings"):
        assert key in body
    again = json.loads(_run(project, "rules", "upsert", "rules", "--scope", "s", "--json")[1])
    assert {d["status"] for d in again["documents"]} == {"unchanged"}


def test_a_path_named_on_the_command_line_is_read_even_outside_the_project(
    project: Path, tmp_path: Path
) -> None:
    # The allowed-roots restriction is for paths an agent sends over MCP; the person at the
    # shell reads what they name.
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# x\n\n- Always do y.\n", encoding="utf-8")
    code, out, _ = _run(project, "rules", "upsert", str(outside), "--scope", "s", "--json")
    assert code == 0, out
    assert json.loads(out)["documents"][0]["status"] == "created"


def test_include_and_exclude_decide_what_a_folder_walk_takes(project: Path) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "style.md").write_text("# Style\n\n- Always use tabs.\n", "utf-8")
    (project / "rules" / "old.md").write_text("# Old\n\n- Always use spaces.\n", "utf-8")
    _, out, _ = _run(project, "rules", "upsert", ".", "--scope", "s", "--json")
    body = json.loads(out)
    status = {d["path"]: d["status"] for d in body["documents"]}
    assert status["docs/style.md"] == "skipped"
    assert "plain markdown" in next(
        d["error"] for d in body["documents"] if d["path"] == "docs/style.md"
    )
    assert status["rules/old.md"] == "created"  # a folder named for rules
    _, out, _ = _run(
        project, "rules", "upsert", ".", "--scope", "t", "--json",
        "--include", "docs/*.md", "--exclude", "rules/old.md",
    )  # fmt: skip
    status = {d["path"]: d["status"] for d in json.loads(out)["documents"]}
    assert status["docs/style.md"] == "created"
    assert status["rules/old.md"] == "skipped"


def test_detect_human_and_json(ingested: Path) -> None:
    code, out, _ = _run(ingested, "rules", "detect", "Add a FastAPI login endpoint", "--keywords")
    assert code == 0
    assert "layer       2-Application" in out
    assert "keywords" in out
    code, out, _ = _run(ingested, "rules", "detect", "Add a login endpoint", "--json")
    assert json.loads(out)["context"]["detected_layer"] == "2-Application"


def test_detect_empty_task_is_an_error(ingested: Path) -> None:
    code, out, _ = _run(ingested, "rules", "detect", "  ", "--json")
    assert code == 2
    assert json.loads(out)["error"]["code"] == "invalid_input"


def test_query_prints_the_block_and_json(ingested: Path) -> None:
    code, out, err = _run(
        ingested,
        "rules",
        "query",
        "Add a login endpoint",
        "--scope",
        "s",
        "--breadcrumbs",
        "--budget",
        "300",
        "--explain",
    )
    assert code == 0
    assert out.startswith("## Project rules for this task")
    assert "_source: rules/auth.md" in out
    assert "/300 tokens" in err
    code, out, _ = _run(
        ingested,
        "rules",
        "query",
        "Add a login endpoint",
        "--scope",
        "s",
        "--json",
        "--max-items",
        "2",
        "--strict-layer",
    )
    body = json.loads(out)
    assert len(body["directives"]) == 2
    assert body["diagnostics"]["retrieval_stats"]["searched"] == 9


def test_query_on_empty_store_fails_with_the_spec_message(project: Path) -> None:
    code, out, _ = _run(project, "rules", "query", "anything", "--scope", "empty", "--json")
    assert code == 1
    assert json.loads(out)["error"]["message"].startswith("Knowledge graph is empty.")


def test_stdin_batches_give_one_json_line_per_task(ingested: Path) -> None:
    tasks = "Add a login endpoint\n\n   \nBackfill the migrations\n"
    code, out, _ = _run(ingested, "rules", "query", "--stdin", "--scope", "s", input=tasks)
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == 2
    assert all(line["ok"] for line in lines)
    assert lines[1]["directives"][0]["rule_id"] == "migrations"
    code, out, _ = _run(ingested, "rules", "detect", "--stdin", "--scope", "s", input=tasks)
    assert [json.loads(line)["context"]["detected_layer"] for line in out.splitlines()] == [
        "2-Application",
        "4-Persistence",
    ]


def test_list_show_rm(ingested: Path) -> None:
    code, out, _ = _run(ingested, "rules", "list", "--scope", "s", "--json")
    assert {r["rule_id"] for r in json.loads(out)["rules"]} == {
        "auth",
        "api-validation",
        "migrations",
        "logging",
    }
    code, out, _ = _run(ingested, "rules", "show", "auth", "--scope", "s")
    assert code == 0 and "[MUST] Hash passwords with the platform library" in out
    code, out, _ = _run(ingested, "rules", "rm", "auth", "--scope", "s")
    assert code == 0 and "removed auth" in out
    code, out, _ = _run(ingested, "rules", "show", "auth", "--scope", "s", "--json")
    assert code == 3


def test_real_subprocess_upsert_and_query(project: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MEMOIR_EMBEDDING__MODEL": "hash:384",
        "MEMOIR_DATABASE_URL": f"sqlite:///{project / 'sub.db'}",
    }
    command = [sys.executable, "-c", "from server.cli.main import main; main()"]
    upsert = subprocess.run(
        [*command, "rules", "upsert", "rules", "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert upsert.returncode == 0, upsert.stderr
    query = subprocess.run(
        [*command, "rules", "query", "Add a login endpoint", "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout)["citations"]


def test_runs_lists_recorded_queries(ingested: Path) -> None:
    code, out, _ = _run(ingested, "rules", "runs", "--scope", "s", "--json")
    assert code == 0 and json.loads(out)["runs"] == []
    for task in ("Add a login endpoint", "Backfill the migrations"):
        assert _run(ingested, "rules", "query", task, "--scope", "s", "--json")[0] == 0
    code, out, _ = _run(ingested, "rules", "runs", "--scope", "s", "--json", "--limit", "5")
    runs = json.loads(out)["runs"]
    assert code == 0
    assert [r["payload"]["task"] for r in runs] == [
        "Backfill the migrations",
        "Add a login endpoint",
    ]
    assert runs[0]["payload"]["detected_layer"] == "4-Persistence"
    assert runs[0]["took_ms"] > 0
    code, out, _ = _run(ingested, "rules", "runs", "--scope", "s", "--limit", "1")
    assert code == 0
    assert "Backfill the migrations" in out and "Add a login endpoint" not in out
    assert "4-Persistence" in out
    code, _, _ = _run(ingested, "rules", "runs", "--scope", "s", "--limit", "0")
    assert code == 2
