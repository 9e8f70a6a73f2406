"""Index maintenance for ``memoir compact``."""

from __future__ import annotations

from typing import Any

__all__ = ["optimise_indexes", "vacuum"]


def optimise_indexes(conn: Any) -> None:
    """Merge the FTS5 index segments and refresh the planner's statistics."""
    conn.execute("INSERT INTO item_fts(item_fts) VALUES ('optimize')")
    conn.execute("ANALYZE")


def vacuum(conn: Any) -> None:
    """Rebuild the file (must run outside a transaction, on an autocommit connection)."""
    conn.execute("VACUUM")
