"""SQLite driver errors as memoir's errors: what went wrong, the file, and the fix."""

from __future__ import annotations

from pathlib import Path

from memory_core.errors import (
    DatabaseCorruptError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    MemoirError,
    StorageError,
)

__all__ = ["is_driver_error", "recovery_hint", "translate_error"]

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


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a DB-API driver (every driver names its base ``Error``)."""
    return any(cls.__name__ in ("Error", "DatabaseError") for cls in type(exc).__mro__)
