"""Pick a SQLite driver that can load sqlite-vec and has FTS5.

Many Python builds (pyenv's among them) compile the stdlib ``sqlite3`` without
``enable_load_extension``, so sqlite-vec cannot load into it. We try, in order: the stdlib,
``pysqlite3`` (the ``pysqlite3-binary`` wheel) and ``sqlean`` (``sqlean-py``), and keep the first
that loads sqlite-vec and compiles an FTS5 table. The choice is made once per process.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from memory_core.errors import ExtensionUnavailableError

__all__ = ["DriverSource", "SqliteDriver", "load_vec_extension", "select_driver"]

DriverSource = Literal["stdlib", "pysqlite3", "sqlean"]

_CANDIDATES: tuple[tuple[DriverSource, str], ...] = (
    ("stdlib", "sqlite3"),
    ("pysqlite3", "pysqlite3.dbapi2"),
    ("sqlean", "sqlean"),
)

_INSTALL_HINT = (
    "install a SQLite driver that can load extensions: `pip install pysqlite3-binary` (Linux x86_64) "
    "or `pip install sqlean-py` (other platforms), plus `pip install sqlite-vec`"
)


@dataclass(frozen=True)
class SqliteDriver:
    """The DB-API module in use, where it came from, and the library versions it reports."""

    module: ModuleType
    source: DriverSource
    sqlite_version: str
    vec_version: str

    def connect(self, database: str, **kwargs: Any) -> Any:
        return self.module.connect(database, **kwargs)


def load_vec_extension(conn: Any) -> None:
    """Load sqlite-vec into ``conn`` and switch extension loading off again."""
    import sqlite_vec

    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)


def _probe(module: ModuleType) -> str:
    conn = module.connect(":memory:")
    try:
        if not hasattr(conn, "enable_load_extension"):
            raise AttributeError("enable_load_extension is not compiled in")
        load_vec_extension(conn)
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(body)")
        return str(conn.execute("SELECT vec_version()").fetchone()[0])
    finally:
        conn.close()


@functools.cache
def select_driver() -> SqliteDriver:
    """The first driver that loads sqlite-vec and has FTS5.

    Raises:
        ExtensionUnavailableError: none works; the message lists why each failed and what to
            install.
    """
    failures: list[str] = []
    for source, module_name in _CANDIDATES:
        try:
            module = importlib.import_module(module_name)
            vec_version = _probe(module)
        except Exception as exc:  # any failure just means "try the next driver"
            failures.append(f"{module_name}: {exc}")
            continue
        return SqliteDriver(module, source, str(module.sqlite_version), vec_version)
    raise ExtensionUnavailableError(
        "no SQLite driver here can load sqlite-vec with FTS5 (" + "; ".join(failures) + ")",
        hint=_INSTALL_HINT,
        details={"tried": failures},
    )
