"""The SQLite database: one file, WAL, sqlite-vec, FTS5, safe across processes.

All SQL runs as plain synchronous functions over a DB-API connection (``fn(conn) -> T``) inside
aiosqlite's worker thread, one thread hop per operation. A write is ``BEGIN IMMEDIATE; fn(conn);
COMMIT`` in a single hop, so an item, its FTS row and its vector row land together or not at all,
and a cancelled coroutine can never leave a transaction half-open.

Two connections per store: a writer (serialised by a lock) and a reader, so searches are never
queued behind an ingest in the same process; WAL lets them run side by side.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import anyio
import structlog

from memory_core.config import StorageSettings
from memory_core.errors import (
    DatabaseCorruptError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    MemoirError,
    StorageError,
)
from memory_core.storage.sqlite.driver import SqliteDriver, load_vec_extension, select_driver
from memory_core.storage.sqlite.migrate import apply_pending
from memory_core.storage.url import DatabaseURL

__all__ = ["SqliteDatabase", "recovery_hint"]

T = TypeVar("T")
log = structlog.get_logger(__name__)

_CORRUPT_MARKERS = ("file is not a database", "malformed", "database disk image", "corrupt")
_LOCKED_MARKERS = ("database is locked", "database table is locked", "busy")


def recovery_hint(path: Path | None) -> str:
    """What to do with a corrupt file: keep a copy, salvage what can be read, start again."""
    name = str(path) if path else "the database file"
    return (
        f"keep a copy of {name}; salvage rows with `sqlite3 {name} .recover | sqlite3 recovered.db`; "
        f"or move it aside and re-create the store with `memoir init` and re-ingest "
        f"(or `memoir import` a JSONL export)"
    )


def translate_error(exc: BaseException, path: Path | None) -> MemoirError:
    """Turn a driver exception into an error from memoir's tree, naming the file and the fix."""
    text = str(exc).lower()
    where = str(path) if path else ":memory:"
    if any(marker in text for marker in _CORRUPT_MARKERS):
        return DatabaseCorruptError(
            f"the database {where} is corrupt or not a memoir database: {exc}",
            hint=recovery_hint(path),
        )
    if any(marker in text for marker in _LOCKED_MARKERS):
        return DatabaseLockedError(
            f"the database {where} stayed locked by another process: {exc}",
            hint="wait for the other memoir process to finish, or raise storage.busy_timeout_ms",
        )
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return DatabaseUnavailableError(
            f"cannot open the database {where} for writing: {exc}",
            hint="check that the folder exists and is writable by this user",
        )
    return StorageError(f"database error on {where}: {exc}", hint="run `memoir doctor` for details")


def _create_private_file(path: Path) -> None:
    """Create the store file with mode 0600 before SQLite touches it (WAL files inherit it).

    Raises:
        DatabaseUnavailableError: the folder cannot be created or written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
    except OSError as exc:
        raise DatabaseUnavailableError(
            f"cannot create the database file {path}: {exc.strerror or exc}",
            hint="choose a --db path whose folder can be created and written by this user "
            "(a file may be standing where a folder is needed)",
        ) from exc


class SqliteDatabase:
    """An open SQLite store. Use :meth:`open` / :meth:`close`, then :meth:`read` / :meth:`write`."""

    def __init__(self, url: DatabaseURL, settings: StorageSettings | None = None) -> None:
        self.url = url
        self.settings = settings or StorageSettings()
        self.path: Path | None = url.path.resolve() if url.path else None
        self.driver: SqliteDriver = select_driver()
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = anyio.Lock()
        self.migrations_applied: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------

    def _connect_sync(self) -> Any:
        target = str(self.path) if self.path else ":memory:"
        conn = self.driver.connect(
            target,
            isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
            check_same_thread=False,
            timeout=self.settings.busy_timeout_ms / 1000,
        )
        try:
            load_vec_extension(conn)
            conn.execute(f"PRAGMA busy_timeout = {int(self.settings.busy_timeout_ms)}")
            if self.path:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StorageError(f"could not switch {self.path} to WAL (mode is {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    async def _open_connection(self) -> aiosqlite.Connection:
        connection = aiosqlite.Connection(self._connect_sync, iter_chunk_size=256)
        # A store someone forgot to close must not keep the interpreter alive at exit (its
        # worker thread is non-daemon by default). Every write is one SQLite transaction, so a
        # thread cut off at exit loses at most an uncommitted write, never consistency.
        connection._thread.daemon = True
        try:
            return await connection
        except MemoirError:
            raise
        except Exception as exc:
            raise translate_error(exc, self.path) from exc

    async def open(self, *, create: bool = True, migrate: bool = True) -> SqliteDatabase:
        """Open (and by default create and migrate) the store.

        Raises:
            DatabaseUnavailableError: the file does not exist and ``create`` is False, or it
                cannot be opened.
            DatabaseCorruptError: the file is not a readable SQLite database.
            SchemaError: the schema is newer than this code.
        """
        if self.path and not self.path.exists():
            if not create:
                raise DatabaseUnavailableError(
                    f"no memoir database at {self.path}",
                    hint=f"create it with `memoir init {self.path.parent}` or pass --db",
                )
            _create_private_file(self.path)
        if self.path:
            # Probe once in a plain thread: a corrupt or foreign file fails here, cleanly, rather
            # than inside aiosqlite's worker (which then outlives the event loop).
            try:
                await anyio.to_thread.run_sync(lambda: self._connect_sync().close())
            except MemoirError:
                raise
            except Exception as exc:
                raise translate_error(exc, self.path) from exc
        self._writer = await self._open_connection()
        try:
            # An in-memory database is private to its connection, so it gets no second one.
            self._reader = await self._open_connection() if self.path else self._writer
            if migrate:
                self.migrations_applied = await self.write(self._migrate)
                if self.migrations_applied:
                    log.info(
                        "schema migrated", path=str(self.path), applied=self.migrations_applied
                    )
        except BaseException:
            await self.close()  # never leave a connection thread behind a failed open
            raise
        return self

    def _migrate(self, conn: Any) -> list[str]:
        return apply_pending(conn, self.driver.module.complete_statement)

    async def close(self) -> None:
        for conn in {id(c): c for c in (self._reader, self._writer) if c is not None}.values():
            with contextlib.suppress(Exception):
                await conn.close()
        self._reader = self._writer = None

    @property
    def is_open(self) -> bool:
        return self._writer is not None

    # -- running SQL ---------------------------------------------------------------------

    @staticmethod
    async def _run(conn: aiosqlite.Connection, fn: Callable[..., T], *args: Any) -> T:
        # aiosqlite exposes no public "run this function in your thread" call; _execute is that
        # call (it queues fn on the connection's own thread). Kept to this one place.
        raw = conn._conn  # the DB-API connection owned by that thread
        return await conn._execute(fn, raw, *args)  # type: ignore[no-any-return,no-untyped-call]

    def _require(self, conn: aiosqlite.Connection | None) -> aiosqlite.Connection:
        if conn is None:
            raise StorageError("the store is closed", hint="open it with `await Memoir.open(...)`")
        return conn

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` on the reader connection."""
        conn = self._require(self._reader)
        try:
            return await self._run(conn, fn, *args)
        except MemoirError:
            raise
        except Exception as exc:
            if _is_driver_error(exc):
                raise translate_error(exc, self.path) from exc
            raise

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` inside ``BEGIN IMMEDIATE … COMMIT`` on the writer.

        Another process holding the lock is waited for (busy timeout), then retried with
        jittered exponential backoff.

        Raises:
            DatabaseLockedError: the lock was not obtained after every retry.
        """
        conn = self._require(self._writer)
        attempts = self.settings.write_retries + 1
        async with self._write_lock:
            for attempt in range(attempts):
                try:
                    return await self._run(conn, _in_transaction, fn, args)
                except MemoirError:
                    raise
                except Exception as exc:
                    if not _is_driver_error(exc):
                        raise
                    error = translate_error(exc, self.path)
                    if isinstance(error, DatabaseLockedError) and attempt + 1 < attempts:
                        delay = min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())
                        log.warning("database locked, retrying", attempt=attempt + 1, delay=delay)
                        await anyio.sleep(delay)
                        continue
                    raise error from exc
        raise AssertionError("unreachable")  # pragma: no cover


def _is_driver_error(exc: BaseException) -> bool:
    # Every DB-API driver names its base class "Error"; checking by MRO name covers all three.
    return any(cls.__name__ in ("Error", "DatabaseError") for cls in type(exc).__mro__)


def _in_transaction(conn: Any, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result
