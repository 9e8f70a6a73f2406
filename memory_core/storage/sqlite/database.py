"""The SQLite database: one file, WAL, sqlite-vec, FTS5, safe across processes.

All SQL runs as plain synchronous functions over a DB-API connection (``fn(conn) -> T``) inside
aiosqlite's worker thread, one thread hop per operation. A write is ``BEGIN IMMEDIATE; fn(conn);
COMMIT`` in a single hop, so an item, its FTS row and its vector row land together or not at all,
and a cancelled coroutine can never leave a transaction half-open.

Two connections per store: a writer (serialised by a lock) and a reader, so searches are never
queued behind an ingest in the same process; WAL lets them run side by side.

A write is only acknowledged into a store that can keep it (see ``integrity``: the file still
the one opened, writable, and not failing its quick check), and deleting is verifiable (see
``privacy``).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
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
from memory_core.models import StoreHealth
from memory_core.redaction import redact_text
from memory_core.storage.sqlite import privacy
from memory_core.storage.sqlite.driver import SqliteDriver, load_vec_extension, select_driver
from memory_core.storage.sqlite.driver_errors import (
    is_driver_error,
    recovery_hint,
    translate_error,
)
from memory_core.storage.sqlite.integrity import (
    OPEN_CHECK_BUDGET_S,
    PERIODIC_CHECK_BUDGET_S,
    StoreWatch,
)
from memory_core.storage.sqlite.migrate import apply_pending
from memory_core.storage.url import DatabaseURL

__all__ = ["SqliteDatabase", "recovery_hint"]

T = TypeVar("T")
log = structlog.get_logger(__name__)

# Old runs are pruned at most this often (and on open).
_PRUNE_EVERY_S = 3600.0


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
        self._forget_marks = privacy.ForgetMarks()
        self._watch = StoreWatch(self.path, self.settings, self.driver)
        self._pruned_mono: float | None = None

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
            if self.settings.secure_delete:
                conn.execute("PRAGMA secure_delete = ON")
            privacy.create_forget_marks(conn, self._forget_marks)
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
            self._watch.remember_file()
            await self.check_integrity(OPEN_CHECK_BUDGET_S)
            if migrate:
                self.migrations_applied = await self._write(self._migrate)
                if self.migrations_applied:
                    log.info(
                        "schema migrated", path=str(self.path), applied=self.migrations_applied
                    )
                await self._run(self._require(self._writer), self._install_policies)
                if self.settings.secure_delete:
                    await self._write(lambda conn: privacy.enable_fts_secure_delete(conn))
                await self._prune_runs()
        except BaseException:
            await self.close()  # never leave a connection thread behind a failed open
            raise
        return self

    def _install_policies(self, conn: Any) -> None:
        privacy.install_forget_tracking(conn)
        keep_text = self.settings.run_log_text != "none"
        privacy.install_run_policy(conn, privacy.run_payload_policy(keep_text, redact_text))

    async def _prune_runs(self) -> None:
        days = self.settings.run_retention_days
        self._pruned_mono = time.monotonic()
        if days is None:
            return
        pruned = await self._write(lambda conn: privacy.prune_runs(conn, days))
        if pruned:
            log.info("old runs deleted", count=pruned, retention_days=days)

    # -- health (see ``integrity``) -----------------------------------------------------

    def file_problem(self) -> MemoirError | None:
        """Why writes would be lost: the path no longer names the file that is open."""
        return self._watch.file_problem()

    async def check_integrity(self, budget_s: float = PERIODIC_CHECK_BUDGET_S) -> StoreHealth:
        """Run the quick integrity check now (at most ``budget_s`` seconds)."""
        if self._reader is None:
            return self._watch.integrity
        return await self._watch.check(budget_s)

    async def health(self) -> StoreHealth:
        """The file and integrity status (the integrity check runs again when it is due)."""
        return await self._watch.health(check=self.is_open)

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
            if is_driver_error(exc):
                error = translate_error(exc, self.path)
                if isinstance(error, DatabaseCorruptError):
                    self._watch.mark_corrupt(str(exc))
                raise error from exc
            raise

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` inside ``BEGIN IMMEDIATE … COMMIT`` on the writer.

        Another process holding the lock is waited for (busy timeout), then retried with
        jittered exponential backoff. When the transaction deleted content, the WAL is
        checkpointed and emptied (see ``privacy``).

        Raises:
            DatabaseLockedError: the lock was not obtained after every retry.
            DatabaseUnavailableError: the file was deleted or replaced under the open store.
            DatabaseCorruptError: the store failed its integrity check.
        """
        await self._watch.refuse_unsafe_write()
        if self._pruned_mono is not None and time.monotonic() - self._pruned_mono >= _PRUNE_EVERY_S:
            await self._prune_runs()
        return await self._write(fn, *args)

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        conn = self._require(self._writer)
        attempts = self.settings.write_retries + 1
        async with self._write_lock:
            for attempt in range(attempts):
                try:
                    result, scrubbed = await self._run(
                        conn, _write_and_scrub, fn, args, self._forget_marks
                    )
                    if scrubbed is not None and scrubbed[0]:
                        log.info(
                            "WAL not emptied after a delete: another process is reading",
                            path=str(self.path),
                        )
                    return result  # type: ignore[no-any-return]
                except MemoirError:
                    raise
                except Exception as exc:
                    if not is_driver_error(exc):
                        raise
                    error = translate_error(exc, self.path)
                    if isinstance(error, DatabaseCorruptError):
                        self._watch.mark_corrupt(str(exc))
                    if isinstance(error, DatabaseLockedError) and attempt + 1 < attempts:
                        delay = min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())
                        log.warning("database locked, retrying", attempt=attempt + 1, delay=delay)
                        await anyio.sleep(delay)
                        continue
                    raise error from exc
        raise AssertionError("unreachable")  # pragma: no cover


def _write_and_scrub(
    conn: Any, fn: Callable[..., T], args: tuple[Any, ...], marks: privacy.ForgetMarks
) -> tuple[T, tuple[int, int] | None]:
    result = _in_transaction(conn, fn, args)
    try:
        scrubbed = privacy.scrub_if_needed(conn, marks)
    except Exception as exc:  # committed already; the WAL is emptied after the next delete
        if not is_driver_error(exc):
            raise
        scrubbed = (1, -1)
    return result, scrubbed


def _in_transaction(conn: Any, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result
