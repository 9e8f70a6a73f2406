"""What deleting means on SQLite: deleted text leaves the file, and logs keep only what is allowed.

- ``PRAGMA secure_delete`` (per connection) overwrites deleted rows and freed pages with zeros;
- the FTS5 index's ``secure-delete`` option removes a deleted row's terms from the index
  segments instead of leaving them behind a delete marker until the next merge;
- the WAL still holds the frames that first wrote the text: after a transaction that deleted
  or rewrote content, a ``wal_checkpoint(TRUNCATE)`` copies the zeroed pages into the file and
  empties the WAL. Temporary triggers (this connection only, nothing stored in the schema)
  note such transactions by calling a function (so no row changes are counted);
- every ``run`` row is rewritten in its own transaction by :func:`run_payload_policy` (secrets
  redacted, or the task / question text dropped), so the raw text never reaches a page, and
  runs older than the retention are deleted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "CONTENT_TABLES",
    "ForgetMarks",
    "create_forget_marks",
    "enable_fts_secure_delete",
    "install_forget_tracking",
    "install_run_policy",
    "prune_runs",
    "run_payload_policy",
    "scrub_if_needed",
]

# Tables whose rows hold user text (or name it: paths, titles, category names).
CONTENT_TABLES = ("item", "resource", "entity", "observation", "category", "run", "event")
# Keys of a run payload that hold the caller's own words.
_TEXT_KEYS = ("task", "question", "query", "text", "source")


def enable_fts_secure_delete(conn: Any) -> bool:
    """Turn on FTS5 ``secure-delete`` for ``item_fts`` once (it is stored in the index's config).

    Returns:
        True when it was just switched on (a write happened).
    """
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'item_fts_config'").fetchone():
        return False
    row = conn.execute("SELECT v FROM item_fts_config WHERE k = 'secure-delete'").fetchone()
    if row is not None and int(row[0]) == 1:
        return False
    conn.execute("INSERT INTO item_fts(item_fts, rank) VALUES ('secure-delete', 1)")
    return True


class ForgetMarks:
    """Set by the forget triggers of one connection, taken after its transaction commits."""

    def __init__(self) -> None:
        self._pending = False

    def mark(self) -> None:
        self._pending = True

    def take(self) -> bool:
        pending, self._pending = self._pending, False
        return pending


def create_forget_marks(conn: Any, marks: ForgetMarks) -> None:
    """Give ``conn`` the function its forget triggers call."""
    conn.create_function("memoir_forgot", 0, marks.mark)


def install_forget_tracking(conn: Any) -> None:
    """Temporary triggers that mark a transaction which deleted or rewrote content."""
    for table in CONTENT_TABLES:
        if not conn.execute(
            "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone():
            continue
        conn.execute(
            f"CREATE TEMP TRIGGER IF NOT EXISTS memoir_forget_{table} AFTER DELETE ON main.{table} "
            "BEGIN SELECT memoir_forgot(); END"
        )
    conn.execute(
        "CREATE TEMP TRIGGER IF NOT EXISTS memoir_rewrite_item AFTER UPDATE OF text ON main.item "
        "BEGIN SELECT memoir_forgot(); END"
    )


def scrub_if_needed(conn: Any, marks: ForgetMarks) -> tuple[int, int] | None:
    """After a commit: when content was deleted, checkpoint and truncate the WAL.

    Returns:
        None when nothing was deleted, else (busy, frames left): busy is 1 when a reader in
        another process kept the checkpoint from finishing (the WAL is emptied next time).
    """
    if not marks.take():
        return None
    busy, log_frames, checkpointed = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return int(busy), int(log_frames) - int(checkpointed)


def run_payload_policy(keep_text: bool, redact: Callable[[str], str]) -> Callable[[str], str]:
    """The function that rewrites a run payload: secrets redacted, or the text keys dropped."""

    def rewrite(payload: str) -> str:
        if not keep_text:
            try:
                data = json.loads(payload)
            except (TypeError, ValueError):
                return "{}"
            if isinstance(data, dict):
                for key in _TEXT_KEYS:
                    if key in data:
                        data[key] = None
                return redact(json.dumps(data, ensure_ascii=False))
        return redact(payload)

    return rewrite


def install_run_policy(conn: Any, rewrite: Callable[[str], str]) -> None:
    """Rewrite every new run's payload inside the transaction that inserts it."""
    conn.create_function("memoir_run_payload", 1, rewrite, deterministic=True)
    if not conn.execute(
        "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'run'"
    ).fetchone():
        return
    conn.execute(
        "CREATE TEMP TRIGGER IF NOT EXISTS memoir_run_policy AFTER INSERT ON main.run BEGIN "
        "UPDATE run SET payload = memoir_run_payload(NEW.payload) "
        "WHERE run_id = NEW.run_id; END"
    )


def prune_runs(conn: Any, retention_days: float) -> int:
    """Delete runs that started more than ``retention_days`` ago; returns how many."""
    cutoff = (datetime.now(UTC) - timedelta(days=retention_days)).isoformat(timespec="microseconds")
    before = conn.total_changes
    conn.execute("DELETE FROM run WHERE started_at < ?", (cutoff,))
    return int(conn.total_changes - before)
