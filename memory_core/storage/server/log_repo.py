"""Runs, events and meta on a server backend: the ``run``, ``event`` and ``meta`` tables.

Written once for both server dialects; ``postgres/log_repo.py`` and ``mysql/repos.py`` name
the dialect (PostgreSQL also deletes old runs in one statement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.models import EventRecord, RunRecord, utc_now
from memory_core.scope import Scope
from memory_core.storage.records import (
    EVENT_COLUMNS,
    RUN_COLUMNS,
    event_from_row,
    payload_json,
    run_from_row,
)
from memory_core.storage.server.dialect import Dialect

__all__ = ["ServerLog", "ServerMeta"]


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
            (scope.key, kind, started_at or utc_now(), took_ms, payload_json(payload)),
            "run_id",
        )

    def runs(self, scope: Scope, *, kinds: Sequence[str] = (), limit: int = 20) -> list[RunRecord]:
        params: list[Any] = [scope.key]
        where = self._kinds("scope = %s", params, kinds)
        rows = self._conn.execute(
            f"SELECT {RUN_COLUMNS} FROM run WHERE {where} ORDER BY run_id DESC LIMIT %s",
            (*params, max(1, int(limit))),
        ).fetchall()
        return [run_from_row(r) for r in rows]

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
            (scope.key, kind, subject, payload_json(payload), created_at or utc_now()),
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
            f"SELECT {EVENT_COLUMNS} FROM event WHERE {where} "
            "ORDER BY created_at DESC, event_id DESC LIMIT %s",
            (*params, max(1, int(limit))),
        ).fetchall()
        return [event_from_row(r) for r in rows]


class ServerMeta:
    """:class:`~memory_core.storage.ports.MetaRepository` on one server connection."""

    dialect: Dialect

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    @property
    def _key(self) -> str:
        return self.dialect.quote("key")  # a keyword on MySQL

    def get(self, key: str) -> str | None:
        row = self._conn.execute(
            f"SELECT value FROM meta WHERE {self._key} = %s", (key,)
        ).fetchone()
        return None if row is None else str(row[0])

    def set(self, key: str, value: str) -> None:
        d = self.dialect
        self._conn.execute(
            f"INSERT INTO meta ({self._key}, value) VALUES (%s, %s)"
            + d.on_duplicate(self._key, f"value = {d.inserted('value')}"),
            (key, value),
        )

    def all(self) -> dict[str, str]:
        return {
            str(k): str(v)
            for k, v in self._conn.execute(
                f"SELECT {self._key}, value FROM meta ORDER BY {self._key}"
            )
        }

    def bump(self, key: str) -> int:
        d = self.dialect
        sql = f"INSERT INTO meta ({self._key}, value) VALUES (%s, '1')" + d.on_duplicate(
            self._key, f"value = {d.text_plus_one('meta.value')}"
        )
        if d.is_pg:
            row = self._conn.execute(f"{sql} RETURNING value", (key,)).fetchone()
            return int(row[0])
        self._conn.execute(sql, (key,))
        value = self.get(key)
        assert value is not None
        return int(value)
