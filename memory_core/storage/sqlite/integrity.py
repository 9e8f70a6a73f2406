"""Can the open store keep a write? Its file identity, permissions and integrity, watched.

- **The file is still the one opened.** Its (device, inode) is remembered on open; when the
  path no longer names it (deleted, or replaced by another file under a running server), writes
  are refused: they would land in the unlinked inode and be lost.
- **It is writable.** A read-only file system, or a file or folder without write permission,
  refuses writes up front with the reason (reads go on).
- **It passes a quick integrity check.** ``PRAGMA quick_check(N)`` runs on a connection of its
  own (the open ones may answer from their page cache; the check must read the disk), on open
  and then every ``storage.integrity_check_interval_s`` before a write, cut off after a time
  budget so a large store never stalls (status ``unchecked`` then). A corrupt store refuses
  writes, with the recovery steps.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any
from urllib.request import pathname2url

import anyio
import structlog

from memory_core.config import StorageSettings
from memory_core.errors import DatabaseCorruptError, DatabaseUnavailableError, MemoirError
from memory_core.models import StoreHealth, utc_now
from memory_core.storage.sqlite.driver import SqliteDriver
from memory_core.storage.sqlite.driver_errors import (
    is_driver_error,
    recovery_hint,
    translate_error,
)
from memory_core.storage.sqlite.health import read_only_reason

__all__ = ["OPEN_CHECK_BUDGET_S", "PERIODIC_CHECK_BUDGET_S", "StoreWatch", "quick_check"]

log = structlog.get_logger(__name__)

# Time budgets of the quick integrity check: a large store is checked as far as the budget goes
# (status "unchecked" beyond it), so neither opening nor a write waits long.
OPEN_CHECK_BUDGET_S = 0.5
PERIODIC_CHECK_BUDGET_S = 1.0


def quick_check(conn: Any, limit: int, budget_s: float) -> list[str] | None:
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


class StoreWatch:
    """The health of one store file (``path`` None: in memory, always fine)."""

    def __init__(self, path: Path | None, settings: StorageSettings, driver: SqliteDriver) -> None:
        self.path = path
        self.settings = settings
        self.driver = driver
        self.integrity = StoreHealth("unchecked", "not checked yet")
        self._file_id: tuple[int, int] | None = None
        self._checked_mono: float | None = None

    def remember_file(self) -> None:
        if self.path is not None:
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

    def corruption(self) -> MemoirError | None:
        if self.integrity.status != "corrupt":
            return None
        return DatabaseCorruptError(
            f"refusing to write: the database {self.path} failed its integrity check "
            f"({self.integrity.detail})",
            hint=recovery_hint(self.path),
        )

    async def refuse_unsafe_write(self) -> None:
        """Raises the reason a write would be lost or fail (file gone, read-only, corrupt)."""
        problem = self.file_problem() or self.read_only_problem()
        if problem is None:
            await self.check_if_due()
            problem = self.corruption()
        if problem is not None:
            raise problem

    async def check(self, budget_s: float) -> StoreHealth:
        """Run ``PRAGMA quick_check(N)`` for at most ``budget_s`` seconds, from the disk."""
        if self.path is None:
            return self.integrity
        path, limit = self.path, self.settings.integrity_check_max_errors

        def run() -> list[str] | None:
            # mode=rw: never create a file where the store's was deleted.
            conn = self.driver.connect(
                f"file:{pathname2url(str(path))}?mode=rw",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=1.0,
            )
            try:
                return quick_check(conn, limit, budget_s)
            finally:
                conn.close()

        try:
            rows = await anyio.to_thread.run_sync(run)
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            if not isinstance(translate_error(exc, path), DatabaseCorruptError):
                log.info("integrity check skipped", error=str(exc)[:200])  # not a verdict
                return self.integrity
            rows = [str(exc)]
        self._checked_mono = time.monotonic()
        if rows is None:
            self.integrity = StoreHealth(
                "unchecked", f"the check stopped after its {budget_s:g} s budget", utc_now()
            )
        elif rows == ["ok"]:
            self.integrity = StoreHealth("ok", "quick_check: ok", utc_now())
        else:
            self.mark_corrupt("; ".join(rows[:3]))
        return self.integrity

    def mark_corrupt(self, detail: str) -> None:
        if self.integrity.status != "corrupt":
            log.error("store failed its integrity check", path=str(self.path), detail=detail[:300])
        self.integrity = StoreHealth(
            "corrupt", f"quick_check: {detail[:500]}", utc_now(), hint=recovery_hint(self.path)
        )

    async def check_if_due(self) -> None:
        interval = self.settings.integrity_check_interval_s
        now = time.monotonic()
        if interval > 0 and (self._checked_mono is None or now - self._checked_mono >= interval):
            await self.check(PERIODIC_CHECK_BUDGET_S)

    async def health(self, *, check: bool) -> StoreHealth:
        """The file, permission and integrity status (checking again when due and ``check``)."""
        problem = self.file_problem()
        if problem is not None:
            return StoreHealth("replaced", problem.message, utc_now(), hint=problem.hint)
        read_only = self.read_only_problem()
        if read_only is not None:
            return StoreHealth("read_only", read_only.message, utc_now(), hint=read_only.hint)
        if check:
            await self.check_if_due()
        return self.integrity
