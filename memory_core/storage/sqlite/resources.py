"""Resources on SQLite: the ``resource`` table (documents, rule files, conversations…)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.errors import InvalidInputError
from memory_core.filters import Filter
from memory_core.kinds import ItemKind, ResourceKind
from memory_core.models import NewResource, Resource, utc_now
from memory_core.scope import Scope
from memory_core.storage.ports import ResourceTotals, ResourceUpdate
from memory_core.storage.records import resource_assignments
from memory_core.storage.sqlite.filter_sql import compile_filter, order_column, register_functions
from memory_core.storage.sqlite.items import delete_items

__all__ = ["RESOURCE_COLUMNS", "SqliteResources", "row_to_resource"]

RESOURCE_COLUMNS = (
    "resource_id, uid, scope, kind, uri, content_hash, mtime, size, tags, source, created_at, "
    "updated_at, deleted, metadata"
)
_BATCH = 500


def row_to_resource(row: Sequence[Any]) -> Resource:
    return Resource(
        resource_id=int(row[0]),
        uid=str(row[1]),
        scope=str(row[2]),
        kind=row[3],
        uri=str(row[4]),
        content_hash=str(row[5]),
        mtime=row[6],
        size=row[7],
        tags=tuple(json.loads(row[8])),
        source=row[9],
        created_at=str(row[10]),
        updated_at=str(row[11]),
        deleted=bool(row[12]),
        metadata=json.loads(row[13]),
    )


def _check_meta_key(key: str) -> None:
    if not key.isidentifier():
        raise InvalidInputError(f"invalid metadata key {key[:40]!r}", hint="use identifier keys")


class SqliteResources:
    """:class:`~memory_core.storage.ports.ResourceRepository` on one SQLite connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def add(self, resource: NewResource) -> int:
        now = utc_now()
        cursor = self._conn.execute(
            "INSERT INTO resource (uid, scope, kind, uri, content_hash, mtime, size, tags, source, "
            "created_at, updated_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT(uid) DO NOTHING",
            (
                resource.uid,
                resource.scope.key,
                resource.kind,
                resource.uri,
                resource.content_hash,
                resource.mtime,
                resource.size,
                json.dumps(list(resource.tags), ensure_ascii=False),
                resource.source,
                now,
                now,
                json.dumps(resource.metadata, ensure_ascii=False, sort_keys=True),
            ),
        )
        if cursor.rowcount:
            return int(cursor.lastrowid)
        row = self._conn.execute(
            "SELECT resource_id FROM resource WHERE uid = ?", (resource.uid,)
        ).fetchone()
        return int(row[0])

    def _select(self, where: str, params: Sequence[Any]) -> list[Resource]:
        return [
            row_to_resource(r)
            for r in self._conn.execute(
                f"SELECT {RESOURCE_COLUMNS} FROM resource WHERE {where}", list(params)
            )
        ]

    def get(self, resource_ids: Sequence[int]) -> dict[int, Resource]:
        found: dict[int, Resource] = {}
        ids = list(dict.fromkeys(int(i) for i in resource_ids))
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            for res in self._select(f"resource_id IN ({','.join('?' * len(batch))})", batch):
                found[res.resource_id] = res
        return found

    def by_uid(self, uids: Sequence[str]) -> dict[str, Resource]:
        found: dict[str, Resource] = {}
        unique = list(dict.fromkeys(uids))
        for start in range(0, len(unique), _BATCH):
            batch = unique[start : start + _BATCH]
            for res in self._select(f"uid IN ({','.join('?' * len(batch))})", batch):
                found[res.uid] = res
        return found

    def find(
        self,
        scope: Scope | None,
        *,
        kinds: Sequence[ResourceKind] = (),
        uri: str | None = None,
        uri_prefix: str | None = None,
        uid_prefix: str | None = None,
        meta: Mapping[str, str] | None = None,
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Resource]:
        clauses: list[str] = ["1"]
        params: list[Any] = []
        if scope is not None:
            clauses.append("scope = ?")
            params.append(scope.key)
        if kinds:
            clauses.append(f"kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        if uri is not None:
            clauses.append("uri = ?")
            params.append(uri)
        if uri_prefix is not None:
            clauses.append("substr(uri, 1, ?) = ?")
            params.extend([len(uri_prefix), uri_prefix])
        if uid_prefix is not None:
            clauses.append("substr(uid, 1, ?) = ?")
            params.extend([len(uid_prefix), uid_prefix])
        for key, value in (meta or {}).items():
            _check_meta_key(key)
            # Matches the expression index resource_scope_kind_rule for '$.rule_id'.
            clauses.append(f"json_extract(metadata, '$.{key}') = ?")
            params.append(value)
        if not include_deleted:
            clauses.append("deleted = 0")
        # A metadata match is the selective condition: '+' keeps the planner from walking the
        # (scope, kind, uri) index for its order instead of the rule_id expression index.
        order = "+scope, +uri, resource_id" if meta else "scope, uri, resource_id"
        sql = " AND ".join(clauses) + f" ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {max(0, int(limit))}"
        return self._select(sql, params)

    def select(
        self,
        scope: Scope,
        *,
        kinds: Sequence[ResourceKind] = (),
        item_kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        order_by: str | None = None,
        descending: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[int], int]:
        join_on = "item.resource_id = resource.resource_id AND item.deleted = 0"
        params: list[Any] = []
        if item_kinds:
            join_on += f" AND item.kind IN ({','.join('?' * len(item_kinds))})"
            params.extend(item_kinds)
        clauses = ["resource.scope = ?", "resource.deleted = 0"]
        params.append(scope.key)
        if kinds:
            clauses.append(f"resource.kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        if where is not None:
            compiled = compile_filter(where)
            if compiled.needs_glob:
                register_functions(self._conn)
            clauses.append(f"({compiled.sql})")
            params.extend(compiled.params)
        source = f"FROM resource LEFT JOIN item ON {join_on} WHERE {' AND '.join(clauses)}"
        total = int(
            self._conn.execute(
                f"SELECT count(DISTINCT resource.resource_id) {source}", params
            ).fetchone()[0]
        )
        order = ""
        if order_by:
            column = order_column(order_by)
            aggregate = f"max({column})" if order_by.startswith("item.") else column
            order = f"{aggregate} {'DESC' if descending else 'ASC'}, "
        rows = self._conn.execute(
            f"SELECT resource.resource_id {source} GROUP BY resource.resource_id "
            f"ORDER BY {order}resource.resource_id LIMIT ? OFFSET ?",
            (*params, max(0, int(limit)), max(0, int(offset))),
        ).fetchall()
        return [int(r[0]) for r in rows], total

    def totals(self, scope: Scope | None, *, kinds: Sequence[ResourceKind] = ()) -> ResourceTotals:
        clauses, params = ["1"], []
        if scope is not None:
            clauses.append("scope = ?")
            params.append(scope.key)
        if kinds:
            clauses.append(f"kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        live, deleted, size, newest = self._conn.execute(
            "SELECT sum(deleted = 0), sum(deleted = 1), "
            "coalesce(sum(CASE WHEN deleted = 0 THEN size END), 0), "
            "max(CASE WHEN deleted = 0 THEN mtime END) "
            f"FROM resource WHERE {' AND '.join(clauses)}",
            params,
        ).fetchone()
        return ResourceTotals(int(live or 0), int(deleted or 0), int(size or 0), newest)

    def update(self, resource_id: int, update: ResourceUpdate) -> bool:
        columns, params = resource_assignments(update, "?")
        cursor = self._conn.execute(
            f"UPDATE resource SET {', '.join(columns)} WHERE resource_id = ?",
            (*params, resource_id),
        )
        return bool(cursor.rowcount)

    def delete(self, resource_ids: Sequence[int]) -> int:
        ids = [int(i) for i in resource_ids]
        for resource_id in ids:
            items = [
                int(r[0])
                for r in self._conn.execute(
                    "SELECT item_id FROM item WHERE resource_id = ?", (resource_id,)
                )
            ]
            delete_items(self._conn, items)
        self._conn.executemany(
            "UPDATE entity SET resource_id = NULL WHERE resource_id = ?", [(i,) for i in ids]
        )
        before = self._conn.total_changes
        self._conn.executemany("DELETE FROM resource WHERE resource_id = ?", [(i,) for i in ids])
        return int(self._conn.total_changes - before)

    def count(self, scope: Scope | None, *, kinds: Sequence[ResourceKind] = ()) -> int:
        clauses, params = ["deleted = 0"], []
        if scope is not None:
            clauses.append("scope = ?")
            params.append(scope.key)
        if kinds:
            clauses.append(f"kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        sql = f"SELECT count(*) FROM resource WHERE {' AND '.join(clauses)}"
        return int(self._conn.execute(sql, params).fetchone()[0])
