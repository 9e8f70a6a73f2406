"""The SQLite database: one file, WAL, sqlite-vec, FTS5, safe across processes.

All SQL runs as plain synchronous functions over a DB-API connection (``fn(conn) -> T``) inside
aiosqlite's worker thread, one thread hop per operation. A write is ``BEGIN IMMEDIATE; fn(conn);
COMMIT`` in a single hop, so an item, its FTS row and its vector row land together or not at all,
and a cancelled coroutine can never leave a transaction half-open.

Two connections per store: a writer (serialised by a lock) and a reader, so searches are never
queued behind an ingest in the same process; WAL lets them run side by side.

A write is only acknowledged into the file the store was opened on: if the path no longer names
that file (deleted, or replaced by another, under a running server) the write is refused, since
it would land in an unlinked inode and be lost. A quick integrity check (``PRAGMA
quick_check(N)``, cut off after a time budget) runs on open and then every
``storage.integrity_check_interval_s`` before a write; a corrupt store refuses writes.
:meth:`SqliteDatabase.health` reports both. Deleting is verifiable (see ``privacy``).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.request import pathname2url

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
from memory_core.models import StoreHealth, utc_now
from memory_core.redaction import redact_text
from memory_core.storage.sqlite import privacy
from memory_core.storage.sqlite.driver import SqliteDriver, load_vec_extension, select_driver
from memory_core.storage.sqlite.health import read_only_reason
from memory_core.storage.sqlite.migrate import apply_pending
from memory_core.storage.url import DatabaseURL

__all__ = ["SqliteDatabase", "recovery_hint"]

T = TypeVar("T")
log = structlog.get_logger(__name__)

_CORRUPT_MARKERS = ("file is not a database", "malformed", "database disk image", "corrupt")
_LOCKED_MARKERS = ("database is locked", "database table is locked", "busy")

# Time budgets of the quick integrity check: a large store is checked as far as the budget goes
# (status "unchecked" beyond it), so neither opening nor a write waits long.
OPEN_CHECK_BUDGET_S = 0.5
PERIODIC_CHECK_BUDGET_S = 1.0
# Old runs are pruned at most this often (and on open).
_PRUNE_EVERY_S = 3600.0


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
    if "database or disk is full" in text or "no space" in text:
        return DatabaseUnavailableError(
            f"the disk holding {where} is full; the write was not made: {exc}",
            hint="free space on that disk (what was written before is intact), then retry",
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
        self._forget_marks = privacy.ForgetMarks()
        self._file_id: tuple[int, int] | None = None
        self._integrity = StoreHealth("unchecked", "not checked yet")
        self._checked_mono: float | None = None
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
            self._remember_file()
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

    # -- health ----------------------------------------------------------------------------

    def _remember_file(self) -> None:
        if self.path is None:
            return
        info = os.stat(self.path)
        self._file_id = (info.st_dev, info.st_ino)

    def file_problem(self) -> MemoirError | None:
        """Why writes would be lost, when the path no longer names the file that is open."""
        if self.path is None or self._file_id is None:
            return None
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            how = "deleted"
        except OSError as exc:
            how = f"made unreachable ({exc.strerror})"
        else:
            if (info.st_dev, info.st_ino) == self._file_id:
                return None
            how = "replaced by another file"
        return DatabaseUnavailableError(
            f"the database file {self.path} was {how} while memoir had it open; writes are "
            "refused, because they would go to the old, unlinked file and be lost",
            hint="restore the file from a backup (or let memoir create a new store), then "
            "restart the server or command and repeat the writes that were refused",
            details={"path": str(self.path), "file": how},
        )

    def _corruption(self) -> MemoirError | None:
        if self._integrity.status != "corrupt":
            return None
        return DatabaseCorruptError(
            f"refusing to write: the database {self.path} failed its integrity check "
            f"({self._integrity.detail})",
            hint=recovery_hint(self.path),
        )

    async def check_integrity(self, budget_s: float = PERIODIC_CHECK_BUDGET_S) -> StoreHealth:
        """Run ``PRAGMA quick_check(N)`` for at most ``budget_s`` seconds, on a connection of
        its own (the open ones may serve pages from their cache: the check reads the disk)."""
        if self._reader is None or self.path is None:
            return self._integrity
        limit = self.settings.integrity_check_max_errors

        def check() -> list[str] | None:
            # mode=rw: never create a file where the store's was deleted.
            conn = self.driver.connect(
                f"file:{pathname2url(str(self.path))}?mode=rw",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=1.0,
            )
            try:
                return _quick_check(conn, limit, budget_s)
            finally:
                conn.close()

        try:
            rows = await anyio.to_thread.run_sync(check)
        except Exception as exc:
            if not _is_driver_error(exc):
                raise
            error = translate_error(exc, self.path)
            if isinstance(error, DatabaseCorruptError):
                rows = [str(exc)]
            else:  # locked or unreadable for now: not a verdict on the file
                log.info("integrity check skipped", error=str(exc)[:200])
                return self._integrity
        self._checked_mono = time.monotonic()
        if rows is None:
            self._integrity = StoreHealth(
                "unchecked", f"the check stopped after its {budget_s:g} s budget", utc_now()
            )
        elif rows == ["ok"]:
            self._integrity = StoreHealth("ok", "quick_check: ok", utc_now())
        else:
            self._mark_corrupt("; ".join(rows[:3]))
        return self._integrity

    def _mark_corrupt(self, detail: str) -> None:
        if self._integrity.status != "corrupt":
            log.error("store failed its integrity check", path=str(self.path), detail=detail[:300])
        self._integrity = StoreHealth(
            "corrupt", f"quick_check: {detail[:500]}", utc_now(), hint=recovery_hint(self.path)
        )

    async def _check_if_due(self) -> None:
        interval = self.settings.integrity_check_interval_s
        now = time.monotonic()
        if interval > 0 and (self._checked_mono is None or now - self._checked_mono >= interval):
            await self.check_integrity(PERIODIC_CHECK_BUDGET_S)

    def read_only_problem(self) -> MemoirError | None:
        """Why writes would fail, when the file or its folder cannot be written."""
        if self.path is None:
            return None
        reason = read_only_reason(self.path)
        if reason is None:
            return None
        return DatabaseUnavailableError(
            f"the database {self.path} is read-only ({reason}); writes are refused, what is "
            "stored stays readable",
            hint="remount the file system read-write, or give this user write permission on "
            "the file and its folder, then retry",
            details={"path": str(self.path), "read_only": reason},
        )

    async def health(self) -> StoreHealth:
        """The file and integrity status (the integrity check runs again when it is due)."""
        problem = self.file_problem()
        if problem is not None:
            return StoreHealth("replaced", problem.message, utc_now(), hint=problem.hint)
        read_only = self.read_only_problem()
        if read_only is not None:
            return StoreHealth("read_only", read_only.message, utc_now(), hint=read_only.hint)
        if self.is_open:
            await self._check_if_due()
        return self._integrity

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
                error = translate_error(exc, self.path)
                if isinstance(error, DatabaseCorruptError):
                    self._mark_corrupt(str(exc))
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
        problem = self.file_problem() or self.read_only_problem()
        if problem is not None:
            raise problem
        await self._check_if_due()
        corruption = self._corruption()
        if corruption is not None:
            raise corruption
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
                    if not _is_driver_error(exc):
                        raise
                    error = translate_error(exc, self.path)
                    if isinstance(error, DatabaseCorruptError):
                        self._mark_corrupt(str(exc))
                    if isinstance(error, DatabaseLockedError) and attempt + 1 < attempts:
                        delay = min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())
                        log.warning("database locked, retrying", attempt=attempt + 1, delay=delay)
                        await anyio.sleep(delay)
                        continue
                    raise error from exc
        raise AssertionError("unreachable")  # pragma: no cover


def _quick_check(conn: Any, limit: int, budget_s: float) -> list[str] | None:
    """``PRAGMA quick_check(limit)`` rows, or None when it ran out of time."""
    deadline = time.monotonic() + budget_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
    try:
        return [str(r[0]) for r in conn.execute(f"PRAGMA quick_check({int(limit)})").fetchall()]
    except Exception as exc:
        if "interrupt" in str(exc).lower():
            return None
        raise
    finally:
        conn.set_progress_handler(None, 0)


def _is_driver_error(exc: BaseException) -> bool:
    # Every DB-API driver names its base class "Error"; checking by MRO name covers all three.
    return any(cls.__name__ in ("Error", "DatabaseError") for cls in type(exc).__mro__)


def _write_and_scrub(
    conn: Any, fn: Callable[..., T], args: tuple[Any, ...], marks: privacy.ForgetMarks
) -> tuple[T, tuple[int, int] | None]:
    result = _in_transaction(conn, fn, args)
    try:
        scrubbed = privacy.scrub_if_needed(conn, marks)
    except Exception as exc:  # committed already; the WAL is emptied after the next delete
        if not _is_driver_error(exc):
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
