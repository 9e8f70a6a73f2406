"""Leases: a named claim on the layer store with an expiry, so that several processes on one
store (two CLI runs, two servers on one SQLite file or one PostgreSQL database) agree on who
does a piece of work, such as a scope's evolve, and a holder that crashed blocks no one for
longer than its lease.

One row per name in ``layer_lease``: the holder and the time it expires, in the database's own
clock (processes on several machines then compare against one clock). A claim inserts the row,
or takes it over when it has expired or is already this holder's (a renewal); a release deletes
it when it is still this holder's. The SQL stores build the statements here and run them in one
write transaction; :class:`MemoryLeases` is the in-memory store's table (one process).
"""

from __future__ import annotations

import threading
import time
from typing import Literal

from memory_core.storage.layer.sql_common import Placeholder

__all__ = [
    "LEASE_TABLE_DDL",
    "MemoryLeases",
    "lease_claim_sql",
    "lease_holder_sql",
    "lease_release_sql",
]

LEASE_TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS layer_lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, "
    "expires_at {real} NOT NULL)"
)

Dialect = Literal["sqlite", "postgres"]

# Seconds since the epoch, by the database's clock.
_NOW = {
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
    "postgres": "extract(epoch from clock_timestamp())::double precision",
}


def lease_claim_sql(dialect: Dialect) -> str:
    """Claims or renews lease ``name`` for ``holder`` for ``ttl_s`` seconds (parameters: name,
    holder, ttl_s): inserts it, or takes it over when it has expired or is the holder's own.
    Read :func:`lease_holder_sql` in the same transaction to learn who holds it."""
    mark: Placeholder = "?" if dialect == "sqlite" else "%s"
    now = _NOW[dialect]
    return (
        f"INSERT INTO layer_lease (name, holder, expires_at) VALUES ({mark}, {mark}, "
        f"{now} + {mark}) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
        "expires_at = excluded.expires_at WHERE layer_lease.holder = excluded.holder "
        f"OR layer_lease.expires_at < {now}"
    )


def lease_holder_sql(dialect: Dialect) -> str:
    """The holder of lease ``name`` (parameter: name)."""
    mark = "?" if dialect == "sqlite" else "%s"
    return f"SELECT holder FROM layer_lease WHERE name = {mark}"


def lease_release_sql(dialect: Dialect) -> str:
    """Drops lease ``name`` if ``holder`` still holds it (parameters: name, holder)."""
    mark = "?" if dialect == "sqlite" else "%s"
    return f"DELETE FROM layer_lease WHERE name = {mark} AND holder = {mark}"


class MemoryLeases:
    """The lease table of an in-memory store: the same rules, in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[str, float]] = {}

    def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        now = time.time()
        with self._lock:
            current = self._held.get(name)
            if current is None or current[0] == holder or current[1] < now:
                self._held[name] = (holder, now + ttl_s)
                return True
            return False

    def release(self, name: str, holder: str) -> None:
        with self._lock:
            if self._held.get(name, ("", 0.0))[0] == holder:
                del self._held[name]
