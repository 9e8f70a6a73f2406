"""Forgetting is verifiable: after ``rm`` the text is gone from the database file and from the
WAL, while the store is still open (the raw bytes are searched); run logs keep only what the
settings allow, for as long as they allow.

Each deletion test runs with ``storage.secure_delete`` off too, and shows the text lingering
there: the check would catch a regression.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.config import load_settings
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio

MARKER = "Zebracorn7781 quixotic marmalade protocol"
RULE = f"""# Rule: Marmalade

- **Layer**: 2-Backend

## Directives

- [MUST] Follow the {MARKER} on every release.
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _raw(db: Path) -> bytes:
    """Every byte memoir's files hold: the database, its WAL and its shared-memory index."""
    return b"".join(
        p.read_bytes()
        for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))
        if p.exists()
    )


async def _open(db: Path, **storage: object) -> Memoir:
    settings = load_settings(
        {"embedding": {"model": "hash:384"}, "storage": storage}, cwd=db.parent, environ={}
    )
    return await Memoir.open(f"sqlite:///{db}", settings=settings)


def _needle() -> bytes:
    return b"Zebracorn7781"


@pytest.mark.parametrize("secure", [True, False])
async def test_a_removed_document_leaves_no_text_in_the_file_or_the_wal(
    tmp_path: Path, secure: bool
) -> None:
    db = tmp_path / "memoir.db"
    note = tmp_path / "note.md"
    note.write_text(f"{MARKER}.\n\n" + "Filler sentence about other things. " * 200)
    memoir = await _open(db, secure_delete=secure)
    try:
        await memoir.documents.add_paths([str(note)], scope="s")
        assert _needle() in _raw(db)
        await memoir.documents.remove([str(note)], scope="s")
        raw = _raw(db)
    finally:
        await memoir.close()
    if secure:
        assert _needle() not in raw and _needle().lower() not in raw
    else:
        assert _needle() in raw or _needle().lower() in raw  # what secure delete prevents


@pytest.mark.parametrize("secure", [True, False])
async def test_a_removed_rule_leaves_no_text_in_the_file_or_the_wal(
    tmp_path: Path, secure: bool
) -> None:
    db = tmp_path / "memoir.db"
    memoir = await _open(db, secure_delete=secure)
    try:
        await memoir.rules.upsert_text(RULE, path="rules/marmalade.md", scope="s")
        assert _needle() in _raw(db)
        await memoir.rules.remove_rule("marmalade", scope="s")
        raw = _raw(db)
    finally:
        await memoir.close()
    if secure:
        assert _needle() not in raw and _needle().lower() not in raw
    else:
        assert _needle() in raw or _needle().lower() in raw


async def test_runs_older_than_the_retention_are_deleted_on_open(tmp_path: Path) -> None:
    db = tmp_path / "memoir.db"
    memoir = await _open(db)
    await memoir.close()
    old = (datetime.now(UTC) - timedelta(days=40)).isoformat(timespec="microseconds")
    recent = (datetime.now(UTC) - timedelta(days=2)).isoformat(timespec="microseconds")
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO run (scope, kind, started_at, took_ms, payload) VALUES (?,?,?,?,?)",
            [("s", "rules_query", old, 1.0, "{}"), ("s", "rules_query", recent, 1.0, "{}")],
        )
    memoir = await _open(db, run_retention_days=30)
    await memoir.close()
    with sqlite3.connect(db) as conn:
        kept = [r[0] for r in conn.execute("SELECT started_at FROM run")]
    assert kept == [recent]


@pytest.mark.parametrize(("mode", "kept"), [("redacted", True), ("none", False)])
async def test_run_logs_keep_the_task_text_only_when_allowed(
    tmp_path: Path, mode: str, kept: bool
) -> None:
    db = tmp_path / "memoir.db"
    memoir = await _open(db, run_log_text=mode)
    secret = "ghp_LOOxl3gV3FGRmrCNnFZsGqgh0frrhbkVAhRH"
    try:
        await memoir.rules.upsert_text(RULE, path="rules/marmalade.md", scope="s")
        await memoir.rules.query_directives(f"marmalade release with {secret}", scope="s")
        runs = await memoir.rules.list_query_runs(scope="s")
    finally:
        await memoir.close()
    with sqlite3.connect(db) as conn:
        payloads = " ".join(str(r[0]) for r in conn.execute("SELECT payload FROM run"))
    assert runs and payloads
    assert secret not in payloads  # never, in any mode
    assert ("marmalade release" in payloads) is kept
