"""``memoir ingest / ask / categories / runs`` on SQLite, PostgreSQL and MySQL/MariaDB.

The real CLI in a subprocess (what the console script runs), with ``--db`` set to each
backend's URL, in a fresh project folder (so the project scope is new), with the hashing
embedder and the offline model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.scope import project_scope

try:
    from conftest_backends import BACKENDS, backend_url, require_service
except ImportError:  # pragma: no cover - tests/hierarchy became a package
    from hierarchy.conftest_backends import (  # type: ignore[no-redef]
        BACKENDS,
        backend_url,
        require_service,
    )

pytestmark = pytest.mark.parametrize("backend", BACKENDS)

REPO = Path(__file__).resolve().parents[2]
ALICE = REPO / "tests" / "data" / "alice_chapter1.txt"
_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"


def _env() -> dict[str, str]:
    return {
        "PYTHONPATH": str(REPO),
        "MEMOIR_EMBEDDING__MODEL": "hash:384",
        "MEMOIR_LOGGING__LEVEL": "warning",
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
    }


def memoir(
    url: str, cwd: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _ENTRY, "--db", url, *args],
        cwd=cwd,
        env=_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-2000:]
    body: dict[str, Any] = json.loads(done.stdout)
    assert body["ok"] is True
    return body


@pytest.fixture
def project(backend: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(database URL, project folder); a server database is the session's own (dropped at
    exit) and the folder is new, so the project scope is too."""
    require_service(backend)
    folder = tmp_path / "project"
    folder.mkdir()
    yield backend_url(backend, tmp_path), folder


def _walk(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for node in nodes:
        yield node
        yield from _walk(node["children"])


@pytest.mark.slow  # seven CLI processes (~2 s of imports each) per backend
def test_ingest_ask_categories_and_runs_work_against_the_url(
    backend: str, project: tuple[str, Path]
) -> None:
    url, folder = project
    ingested = _json(memoir(url, folder, "ingest", "-", "--json", stdin=ALICE.read_text("utf-8")))
    chunks = ingested["ingest"]["chunks"]
    assert len(chunks) >= 5 and ingested["ingest"]["scope"] == project_scope(folder)

    again = _json(memoir(url, folder, "ingest", str(ALICE), "--json"))
    assert all(c["already_stored"] for c in again["ingest"]["chunks"])

    answer = _json(
        memoir(
            url,
            folder,
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
    assert answer["status"] == "ok" and answer["answer"]
    assert answer["strategy"] == "zoom_in" and answer["max_token_budget"] == 300
    assert sum(u["token_count"] for u in answer["used_chunks"]) <= 300
    assert all(u["text_content"] in ALICE.read_text("utf-8") for u in answer["used_chunks"])

    tree = _json(memoir(url, folder, "categories", "--tree", "--json"))["categories"]
    nodes = list(_walk(tree["nodes"]))
    assert tree["total"] == len(nodes) and {n["level"] for n in nodes} == {1, 2, 3}
    assert sum(n["chunk_count"] or 0 for n in nodes if n["level"] == 3) == len(chunks)
    assert all({"name", "level", "children"} <= set(n) for n in nodes)

    runs = _json(memoir(url, folder, "runs", "--json"))["runs"]
    kinds = [r["kind"] for r in runs if r["kind"] != "hierarchy_tree"]
    assert kinds == ["hierarchy_query", "hierarchy_ingest", "hierarchy_ingest"]
    assert runs[0]["payload"]["strategy"] == "zoom_in"
    # The offline tree is built from clusters of the chunks, and says when it was.
    assert "hierarchy_tree" in {r["kind"] for r in runs}

    human = memoir(url, folder, "categories", "--tree")
    assert human.returncode == 0 and "└── " in human.stdout


def test_an_unusable_database_exits_non_zero_with_the_hint(backend: str, tmp_path: Path) -> None:
    if backend == "sqlite":
        (tmp_path / "memoir.db").write_bytes(b"not a database " * 100)
        url = f"sqlite:///{tmp_path / 'memoir.db'}"
    else:
        scheme = "postgresql" if backend == "postgres" else "mysql"
        url = f"{scheme}://memoir:pw-s3cret@127.0.0.1:1/memoir"
    done = memoir(url, tmp_path, "ask", "anything?", "--json")
    assert done.returncode != 0
    body = json.loads(done.stdout)
    assert body["ok"] is False and body["error"]["hint"]
    assert "pw-s3cret" not in done.stdout + done.stderr
