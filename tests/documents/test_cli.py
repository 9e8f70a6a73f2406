"""The Recall commands run as real subprocesses, as an agent's tool call would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def memoir_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = str(REPO)
    env["MEMOIR_EMBEDDING__MODEL"] = "hash:384"
    return env


def run(
    tmp_path: Path, *args: str, stdin: str | None = None, db: str = "m.db"
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-c",
        "from server.cli.main import main; main()",
        "--db",
        f"sqlite:///{tmp_path / db}",
        *args,
    ]
    return subprocess.run(
        command,
        cwd=tmp_path,
        env=memoir_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok_json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["ok"] is True
    return body


def test_add_search_rm_round_trip(tmp_path: Path, corpus: Path) -> None:
    added = ok_json(run(tmp_path, "add", str(corpus), "--tag", "docs", "--scope", "s", "--json"))
    assert added["added"] == 4
    body = ok_json(
        run(
            tmp_path,
            "search",
            "SigV4 access",
            "--k",
            "2",
            "--filter",
            "doc.tag = 'docs'",
            "--explain",
            "--scope",
            "s",
            "--json",
        )
    )
    assert body["results"][0]["doc"]["path"].endswith("api/auth.md")
    assert "lexical" in body["results"][0]["explain"]
    human = run(tmp_path, "search", "SigV4", "--bm25", "--scope", "s")
    assert human.returncode == 0 and "auth.md" in human.stdout
    removed = ok_json(
        run(tmp_path, "rm", str(corpus / "api" / "auth.md"), "--scope", "s", "--json")
    )
    assert len(removed["removed"]) == 1
    after = ok_json(run(tmp_path, "search", "SigV4", "--bm25", "--scope", "s", "--json"))
    assert all(not r["doc"]["path"].endswith("auth.md") for r in after["results"])


def test_errors_are_json_envelopes_with_exit_codes(tmp_path: Path) -> None:
    empty = run(tmp_path, "search", "   ", "--scope", "s", "--json")
    assert empty.returncode == 2
    assert json.loads(empty.stdout)["error"]["code"] == "invalid_input"
    bad = run(tmp_path, "search", "x", "--filter", "tag = 'x'", "--scope", "s", "--json")
    error = json.loads(bad.stdout)["error"]
    assert bad.returncode == 2 and error["code"] == "query_syntax"
    assert error["details"]["column"] == 1 and error["hint"]
    rql = run(tmp_path, "query", "--rql", "SELECT text FROM chunk LIMIT 0", "--scope", "s")
    assert rql.returncode == 2 and "out of range" in rql.stderr and "hint:" in rql.stderr
    missing = run(tmp_path, "rm", "nosuchdoc", "--scope", "s", "--json")
    assert missing.returncode == 3


def test_stdin_batch_one_json_line_per_query(tmp_path: Path) -> None:
    ok_json(
        run(
            tmp_path,
            "add",
            "--text",
            "retry with backoff",
            "--path",
            "a.md",
            "--scope",
            "s",
            "--json",
        )
    )
    result = run(tmp_path, "search", "--stdin", "--scope", "s", stdin='retry\n\nbackoff\n   \n"(\n')
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["query"]["text"] for line in lines] == ["retry", "backoff", '"(']
    assert lines[0]["results"][0]["doc"]["path"] == "a.md"
    assert result.returncode == 0


def test_context_export_import_and_compact(tmp_path: Path, corpus: Path) -> None:
    ok_json(run(tmp_path, "add", str(corpus), "--scope", "s", "--json"))
    context = ok_json(
        run(
            tmp_path,
            "context",
            "deploy retries",
            "--budget-tokens",
            "30",
            "--diversity",
            "1",
            "--scope",
            "s",
            "--json",
        )
    )
    assert context["context"]["used_tokens"] <= 30
    export = tmp_path / "out.jsonl"
    done = run(tmp_path, "export", "--out", str(export), "--scope", "s")
    assert done.returncode == 0 and export.exists()
    imported = ok_json(run(tmp_path, "import", str(export), "--scope", "s", "--json", db="copy.db"))
    assert imported["written"]["resource"] == 4 and imported["reembedded"] is False
    compact = ok_json(run(tmp_path, "compact", "--json"))
    assert "purged" in compact


def test_two_processes_adding_at_once_lose_nothing(tmp_path: Path) -> None:
    folders = []
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        for i in range(25):
            (folder / f"{i}.md").write_text(f"{name} document {i} " * 30, encoding="utf-8")
        folders.append(folder)
    ok_json(run(tmp_path, "add", "--text", "seed", "--path", "seed.md", "--scope", "s", "--json"))
    base = [
        sys.executable,
        "-c",
        "from server.cli.main import main; main()",
        "--db",
        f"sqlite:///{tmp_path / 'm.db'}",
    ]
    procs = [
        subprocess.Popen(
            [*base, "add", str(folder), "--scope", "s", "--json"],
            cwd=tmp_path,
            env=memoir_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in folders
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out)["added"] == 25
    stats = ok_json(
        run(
            tmp_path, "query", "--rql", "SELECT doc.id FROM doc LIMIT 100", "--scope", "s", "--json"
        )
    )
    assert stats["stats"]["total_hits"] == 51


def test_add_under_json_writes_one_progress_line_per_file_to_stderr(
    tmp_path: Path, corpus: Path
) -> None:
    result = run(tmp_path, "add", str(corpus), "--scope", "s", "--json")
    ok_json(result)  # stdout stays one JSON document
    lines = [json.loads(line) for line in result.stderr.splitlines() if '"progress"' in line]
    assert [line["files_done"] for line in lines][-1] == lines[-1]["files_total"] == 4
    assert all(line["event"] == "progress" for line in lines) and len(lines) >= 4
