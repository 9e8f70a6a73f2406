"""Runs, events, tombstones and meta on PostgreSQL: ``run``, ``event``, ``tombstone``, ``meta``.

Runs, events and meta are the shared server repositories in the PostgreSQL dialect; tombstones
are PostgreSQL's alone (the MySQL backend has no tombstone port).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from memory_core.models import Tombstone, utc_now
from memory_core.scope import Scope
from memory_core.storage.records import TOMBSTONE_COLUMNS, payload_json, tombstone_from_row
from memory_core.storage.server.dialect import POSTGRES
from memory_core.storage.server.log_repo import ServerLog, ServerMeta

__all__ = ["PgLog", "PgMeta", "PgTombstones"]

Conn = psycopg.Connection[Any]


class PgLog(ServerLog):
    """:class:`~memory_core.storage.ports.LogRepository` on one PostgreSQL connection."""

    dialect = POSTGRES

    def prune_runs(self, scope: Scope, kind: str, *, keep: int) -> int:
        # One statement: PostgreSQL can read the table it deletes from.
        return int(
            self._conn.execute(
                "DELETE FROM run WHERE scope = %s AND kind = %s AND run_id <= ("
                "SELECT run_id FROM run WHERE scope = %s AND kind = %s "
                "ORDER BY run_id DESC LIMIT 1 OFFSET %s)",
                (scope.key, kind, scope.key, kind, max(0, int(keep))),
            ).rowcount
        )


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
        row = self._conn.execute(
            "INSERT INTO tombstone (scope, kind, uid, deleted_at, expires_at, payload) "
            "VALUES (%s,%s,%s,%s,%s,%s) RETURNING tombstone_id",
            (scope.key, kind, uid, utc_now(), expires_at, payload_json(payload)),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def find(
        self, scope: Scope, kind: str, uids: Sequence[str], *, now: str | None = None
    ) -> dict[str, Tombstone]:
        unique = list(dict.fromkeys(uids))
        found: dict[str, Tombstone] = {}
        if not unique:
            return found
        for r in self._conn.execute(
            f"SELECT {TOMBSTONE_COLUMNS} FROM tombstone WHERE scope = %s AND kind = %s "
            "AND uid = ANY(%s) "
            "AND (expires_at IS NULL OR expires_at > %s) ORDER BY tombstone_id",
            (scope.key, kind, unique, now or utc_now()),
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


class PgMeta(ServerMeta):
    """:class:`~memory_core.storage.ports.MetaRepository` on one PostgreSQL connection."""

    dialect = POSTGRES
