"""Runs, events, tombstones and meta on PostgreSQL: ``run``, ``event``, ``tombstone``, ``meta``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from memory_core.models import EventRecord, RunRecord, Tombstone, utc_now
from memory_core.scope import Scope

__all__ = ["PgLog", "PgMeta", "PgTombstones"]

Conn = psycopg.Connection[Any]


def _json(value: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(value or {}), ensure_ascii=False, sort_keys=True, default=str)


def _id(conn: Conn, sql: str, params: Sequence[Any]) -> int:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


class PgLog:
    """:class:`~memory_core.storage.ports.LogRepository` on one PostgreSQL connection."""

    def __init__(self, conn: Conn) -> None:
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
        return _id(
            self._conn,
            "INSERT INTO run (scope, kind, started_at, took_ms, payload) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING run_id",
            (scope.key, kind, started_at or utc_now(), took_ms, _json(payload)),
        )

    def runs(self, scope: Scope, *, kinds: Sequence[str] = (), limit: int = 20) -> list[RunRecord]:
        where, params = "scope = %s", [scope.key]
        if kinds:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))  # type: ignore[arg-type]
        rows = self._conn.execute(
            f"SELECT run_id, scope, kind, started_at, took_ms, payload FROM run WHERE {where} "
            "ORDER BY run_id DESC LIMIT %s",
            (*params, max(1, int(limit))),
        ).fetchall()
        return [
            RunRecord(int(r[0]), str(r[1]), str(r[2]), str(r[3]), r[4], json.loads(r[5] or "{}"))
            for r in rows
        ]

    def prune_runs(self, scope: Scope, kind: str, *, keep: int) -> int:
        return self._conn.execute(
            "DELETE FROM run WHERE scope = %s AND kind = %s AND run_id <= ("
            "SELECT run_id FROM run WHERE scope = %s AND kind = %s "
            "ORDER BY run_id DESC LIMIT 1 OFFSET %s)",
            (scope.key, kind, scope.key, kind, max(0, int(keep))),
        ).rowcount

    def record_event(
        self,
        scope: Scope,
        kind: str,
        *,
        subject: str | None = None,
        payload: Mapping[str, Any] | None = None,
        created_at: str | None = None,
    ) -> int:
        return _id(
            self._conn,
            "INSERT INTO event (scope, kind, subject, payload, created_at) "
            "VALUES (%s,%s,%s,%s,%s) RETURNING event_id",
            (scope.key, kind, subject, _json(payload), created_at or utc_now()),
        )

    def events(
        self,
        scope: Scope,
        *,
        kinds: Sequence[str] = (),
        since: str | None = None,
        limit: int = 100,
    ) -> list[EventRecord]:
        where, params = "scope = %s", [scope.key]
        if kinds:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))  # type: ignore[arg-type]
        if since is not None:
            where += " AND created_at >= %s"
            params.append(since)
        rows = self._conn.execute(
            f"SELECT event_id, scope, kind, subject, created_at, payload FROM event WHERE {where} "
            "ORDER BY created_at DESC, event_id DESC LIMIT %s",
            (*params, max(1, int(limit))),
        ).fetchall()
        return [
            EventRecord(int(r[0]), str(r[1]), str(r[2]), r[3], str(r[4]), json.loads(r[5] or "{}"))
            for r in rows
        ]


class PgTombstones:
    """:class:`~memory_core.storage.ports.TombstoneRepository` on one PostgreSQL connection."""

    def __init__(self, conn: Conn) -> None:
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
        return _id(
            self._conn,
            "INSERT INTO tombstone (scope, kind, uid, deleted_at, expires_at, payload) "
            "VALUES (%s,%s,%s,%s,%s,%s) RETURNING tombstone_id",
            (scope.key, kind, uid, utc_now(), expires_at, _json(payload)),
        )

    def find(
        self, scope: Scope, kind: str, uids: Sequence[str], *, now: str | None = None
    ) -> dict[str, Tombstone]:
        unique = list(dict.fromkeys(uids))
        found: dict[str, Tombstone] = {}
        if not unique:
            return found
        for r in self._conn.execute(
            "SELECT tombstone_id, scope, kind, uid, deleted_at, expires_at, payload "
            "FROM tombstone WHERE scope = %s AND kind = %s AND uid = ANY(%s) "
            "AND (expires_at IS NULL OR expires_at > %s) ORDER BY tombstone_id",
            (scope.key, kind, unique, now or utc_now()),
        ):
            found[str(r[3])] = Tombstone(
                int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), r[5], json.loads(r[6])
            )
        return found

    def purge(
        self,
        scope: Scope | None = None,
        *,
        kinds: Sequence[str] = (),
        expired_before: str | None = None,
    ) -> int:
        clauses: list[str] = ["true"]
        params: list[Any] = []
        if scope is not None:
            clauses.append("scope = %s")
            params.append(scope.key)
        if kinds:
            clauses.append("kind = ANY(%s)")
            params.append(list(kinds))
        if expired_before is not None:
            clauses.append("expires_at IS NOT NULL AND expires_at <= %s")
            params.append(expired_before)
        return self._conn.execute(
            f"DELETE FROM tombstone WHERE {' AND '.join(clauses)}", params
        ).rowcount


class PgMeta:
    """:class:`~memory_core.storage.ports.MetaRepository` on one PostgreSQL connection."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    def get(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def all(self) -> dict[str, str]:
        return {
            str(k): str(v)
            for k, v in self._conn.execute("SELECT key, value FROM meta ORDER BY key")
        }

    def bump(self, key: str) -> int:
        row = self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (%s, '1') "
            "ON CONFLICT (key) DO UPDATE SET value = (meta.value::bigint + 1)::text "
            "RETURNING value",
            (key,),
        ).fetchone()
        assert row is not None
        return int(row[0])
