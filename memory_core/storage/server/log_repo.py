"""Runs and events on a server backend: the ``run`` and ``event`` tables.

Written once for both server dialects; MySQL uses it today. (``postgres/log_repo.py`` keeps its
own twin while another change extends it; it can become a subclass of :class:`ServerLog`.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.models import EventRecord, RunRecord, utc_now
from memory_core.scope import Scope
from memory_core.storage.server.dialect import Dialect

__all__ = ["ServerLog", "dumps"]


def dumps(value: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(value or {}), ensure_ascii=False, sort_keys=True, default=str)


class ServerLog:
    """:class:`~memory_core.storage.ports.LogRepository` on one server connection."""

    dialect: Dialect

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def _insert(self, sql: str, params: Sequence[Any], key: str) -> int:
        """Run an INSERT and return the new row's ``key``."""
        if self.dialect.is_pg:
            row = self._conn.execute(f"{sql} RETURNING {key}", params).fetchone()
            return int(row[0])
        return int(self._conn.execute(sql, params).lastrowid)

    def _kinds(self, where: str, params: list[Any], kinds: Sequence[str]) -> str:
        if kinds:
            clause, more = self.dialect.in_list("kind", list(kinds))
            params += more
            return f"{where} AND {clause}"
        return where

    def record_run(
        self,
        scope: Scope,
        kind: str,
        *,
        took_ms: float | None,
        payload: Mapping[str, Any],
        started_at: str | None = None,
    ) -> int:
        return self._insert(
            "INSERT INTO run (scope, kind, started_at, took_ms, payload) VALUES (%s, %s, %s, %s, %s)",
            (scope.key, kind, started_at or utc_now(), took_ms, dumps(payload)),
            "run_id",
        )

    def runs(self, scope: Scope, *, kinds: Sequence[str] = (), limit: int = 20) -> list[RunRecord]:
        params: list[Any] = [scope.key]
        where = self._kinds("scope = %s", params, kinds)
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
        # The newest run to delete, read first (MySQL cannot read the table it deletes from).
        row = self._conn.execute(
            "SELECT run_id FROM run WHERE scope = %s AND kind = %s "
            "ORDER BY run_id DESC LIMIT 1 OFFSET %s",
            (scope.key, kind, max(0, int(keep))),
        ).fetchone()
        if row is None:
            return 0
        return int(
            self._conn.execute(
                "DELETE FROM run WHERE scope = %s AND kind = %s AND run_id <= %s",
                (scope.key, kind, int(row[0])),
            ).rowcount
        )

    def record_event(
        self,
        scope: Scope,
        kind: str,
        *,
        subject: str | None = None,
        payload: Mapping[str, Any] | None = None,
        created_at: str | None = None,
    ) -> int:
        return self._insert(
            "INSERT INTO event (scope, kind, subject, payload, created_at) VALUES (%s,%s,%s,%s,%s)",
            (scope.key, kind, subject, dumps(payload), created_at or utc_now()),
            "event_id",
        )

    def events(
        self,
        scope: Scope,
        *,
        kinds: Sequence[str] = (),
        since: str | None = None,
        limit: int = 100,
    ) -> list[EventRecord]:
        params: list[Any] = [scope.key]
        where = self._kinds("scope = %s", params, kinds)
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
