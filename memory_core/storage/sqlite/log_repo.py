"""Runs and events on SQLite: the ``run`` and ``event`` tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.models import EventRecord, RunRecord, Tombstone, utc_now
from memory_core.scope import Scope
from memory_core.storage.records import (
    EVENT_COLUMNS,
    RUN_COLUMNS,
    TOMBSTONE_COLUMNS,
    event_from_row,
    payload_json,
    run_from_row,
    tombstone_from_row,
)

__all__ = ["SqliteLog", "SqliteTombstones"]


class SqliteLog:
    """:class:`~memory_core.storage.ports.LogRepository` on one SQLite connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def record_run(
        self,
        scope: Scope,
        kind: str,
        *,
        took_ms: float | None,
        payload: Mapping[str, Any],
        started_at: str | None = None,
    ) -> int:
        cursor = self._conn.execute(
            "INSERT INTO run (scope, kind, started_at, took_ms, payload) VALUES (?, ?, ?, ?, ?)",
            (scope.key, kind, started_at or utc_now(), took_ms, payload_json(payload)),
        )
        return int(cursor.lastrowid)

    def runs(self, scope: Scope, *, kinds: Sequence[str] = (), limit: int = 20) -> list[RunRecord]:
        where, params = "scope = ?", [scope.key]
        if kinds:
            where += f" AND kind IN ({','.join('?' * len(kinds))})"
            params.extend(kinds)
        rows = self._conn.execute(
            f"SELECT {RUN_COLUMNS} FROM run WHERE {where} ORDER BY run_id DESC LIMIT ?",
            (*params, max(1, int(limit))),
        ).fetchall()
        return [run_from_row(r) for r in rows]

    def prune_runs(self, scope: Scope, kind: str, *, keep: int) -> int:
        before = self._conn.total_changes
        self._conn.execute(
            "DELETE FROM run WHERE scope = ? AND kind = ? AND run_id <= ("
            "SELECT run_id FROM run WHERE scope = ? AND kind = ? "
            "ORDER BY run_id DESC LIMIT 1 OFFSET ?)",
            (scope.key, kind, scope.key, kind, max(0, int(keep))),
        )
        return int(self._conn.total_changes - before)

    def record_event(
        self,
        scope: Scope,
        kind: str,
        *,
        subject: str | None = None,
        payload: Mapping[str, Any] | None = None,
        created_at: str | None = None,
    ) -> int:
        cursor = self._conn.execute(
            "INSERT INTO event (scope, kind, subject, payload, created_at) VALUES (?,?,?,?,?)",
            (scope.key, kind, subject, payload_json(payload), created_at or utc_now()),
        )
        return int(cursor.lastrowid)

    def events(
        self,
        scope: Scope,
        *,
        kinds: Sequence[str] = (),
        since: str | None = None,
        limit: int = 100,
    ) -> list[EventRecord]:
        where, params = "scope = ?", [scope.key]
        if kinds:
            where += f" AND kind IN ({','.join('?' * len(kinds))})"
            params.extend(kinds)
        if since is not None:
            where += " AND created_at >= ?"
            params.append(since)
        rows = self._conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM event WHERE {where} "
            "ORDER BY created_at DESC, event_id DESC LIMIT ?",
            (*params, max(1, int(limit))),
        ).fetchall()
        return [event_from_row(r) for r in rows]


class SqliteTombstones:
    """:class:`~memory_core.storage.ports.TombstoneRepository` on one SQLite connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def add(
        self,
        scope: Scope,
        kind: str,
        uid: str,
        *,
        expires_at: str | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> int:
        cursor = self._conn.execute(
            "INSERT INTO tombstone (scope, kind, uid, deleted_at, expires_at, payload) "
            "VALUES (?,?,?,?,?,?)",
            (scope.key, kind, uid, utc_now(), expires_at, payload_json(payload)),
        )
        return int(cursor.lastrowid)

    def find(
        self, scope: Scope, kind: str, uids: Sequence[str], *, now: str | None = None
    ) -> dict[str, Tombstone]:

        moment = now or utc_now()
        found: dict[str, Tombstone] = {}
        unique = list(dict.fromkeys(uids))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            for r in self._conn.execute(
                f"SELECT {TOMBSTONE_COLUMNS} FROM tombstone WHERE scope = ? AND kind = ? "
                f"AND uid IN ({','.join('?' * len(batch))}) "
                "AND (expires_at IS NULL OR expires_at > ?) ORDER BY tombstone_id",
                (scope.key, kind, *batch, moment),
            ):
                found[str(r[3])] = tombstone_from_row(r)
        return found

    def purge(
        self,
        scope: Scope | None = None,
        *,
        kinds: Sequence[str] = (),
        expired_before: str | None = None,
    ) -> int:
        clauses, params = ["1"], []
        if scope is not None:
            clauses.append("scope = ?")
            params.append(scope.key)
        if kinds:
            clauses.append(f"kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        if expired_before is not None:
            clauses.append("expires_at IS NOT NULL AND expires_at <= ?")
            params.append(expired_before)
        before = self._conn.total_changes
        self._conn.execute(f"DELETE FROM tombstone WHERE {' AND '.join(clauses)}", params)
        return int(self._conn.total_changes - before)
