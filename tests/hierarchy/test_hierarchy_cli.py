"""``memoir ingest / ask / categories / runs`` as a real subprocess, with the offline model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import DATA


def memoir(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env["HOME"] = str(cwd)
    env["XDG_DATA_HOME"] = str(cwd / "xdg")
    env["MEMOIR_EMBEDDING__MODEL"] = "hash:384"  # fast; the offline model needs no key
    return subprocess.run(
        [sys.executable, "-m", "server.cli", "--db", f"sqlite:///{cwd}/m.db", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ingest_ask_categories_and_runs_round_trip(tmp_path: Path) -> None:
    ingested = memoir(
        "ingest", str(DATA / "alice_chapter1.txt"), "--scope", "s", "--json", cwd=tmp_path
    )
    assert ingested.returncode == 0, ingested.stderr
    body = json.loads(ingested.stdout)
    assert body["ok"] and len(body["ingest"]["chunks"]) >= 6
    assert body["ingest"]["model_used"] == {"classify": ["memoir-offline:clusters"]}

    piped = memoir("ingest", "-", "--scope", "s", cwd=tmp_path, stdin="Notes from stdin.")
    assert piped.returncode == 0 and "ingested 1 chunks" in piped.stdout

    asked = memoir(
        "ask",
        "What words were marked on the cake?",
        "--scope",
        "s",
        "--strategy",
        "wide_branch",
        "--budget",
        "700",
        "--json",
        cwd=tmp_path,
    )
    assert asked.returncode == 0, asked.stderr
    query = json.loads(asked.stdout)["query"]
    assert query["strategy"] == "wide_branch" and query["max_token_budget"] == 700
    assert sum(c["token_count"] for c in query["used_chunks"]) <= 700
    for chunk in query["used_chunks"]:
        assert set(chunk) >= {
            "chunk_id",
            "text_content",
            "category_path",
            "ranked_relevance",
            "created_at",
            "chosen_strategy",
        }
    assert query["citations"] and query["total_latency"] > 0 and query["timestamp"]

    summarised = memoir(
        "ask",
        "What happened?",
        "--scope",
        "s",
        "--strategy",
        "branch_out",
        "--budget",
        "200",
        "--summarize",
        "--json",
        cwd=tmp_path,
    )
    result = json.loads(summarised.stdout)["query"]
    assert result["summarized"] and result["parts"] >= 2

    tree = memoir("categories", "--json", "--scope", "s", cwd=tmp_path)
    nodes = json.loads(tree.stdout)["categories"]["nodes"]
    assert nodes and all(set(n) >= {"name", "level", "children"} for n in nodes)
    assert all(n["level"] == 1 and n["children"] for n in nodes)

    drawn = memoir("categories", "--tree", "--scope", "s", cwd=tmp_path)
    assert drawn.returncode == 0 and "└── " in drawn.stdout

    runs = memoir("runs", "--json", "--scope", "s", "--kind", "hierarchy_query", cwd=tmp_path)
    records = json.loads(runs.stdout)["runs"]
    assert [r["payload"]["strategy"] for r in records] == ["branch_out", "wide_branch"]
    assert records[0]["payload"]["summarized"] is True


def test_ask_on_an_empty_store_fails_with_the_hint(tmp_path: Path) -> None:
    result = memoir("ask", "anything?", "--scope", "nothing", cwd=tmp_path)
    assert result.returncode == 3
    assert "hint: save knowledge first" in result.stderr
    as_json = memoir("ask", "anything?", "--scope", "nothing", "--json", cwd=tmp_path)
    body = json.loads(as_json.stdout)
    assert body["ok"] is False and body["query"]["error"]["code"] == "empty_hierarchy"


def test_ingest_needs_exactly_one_source(tmp_path: Path) -> None:
    result = memoir("ingest", "--json", cwd=tmp_path)
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["code"] == "invalid_input"
