"""Resources on a server backend: the ``resource`` table (documents, rule files, conversations…)."""

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
from memory_core.storage.server.dialect import Dialect
from memory_core.storage.server.filter_sql import compile_filter, order_column
from memory_core.storage.sqlite.resources import RESOURCE_COLUMNS, row_to_resource

__all__ = ["ServerResources"]


def _check_meta_key(key: str) -> None:
    if not key.isidentifier():
        raise InvalidInputError(f"invalid metadata key {key[:40]!r}", hint="use identifier keys")


class ServerResources:
    """:class:`~memory_core.storage.ports.ResourceRepository` on one server connection.

    A backend sets :attr:`dialect` and says how its items go (:meth:`_delete_items`) and what
    else refers to a resource (:meth:`_detach`).
    """

    dialect: Dialect

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def _delete_items(self, item_ids: list[int]) -> None:
        raise NotImplementedError

    def _detach(self, resource_ids: list[int]) -> None:
        """Clear other tables' references to resources about to be deleted."""

    def _where(
        self, scope: Scope | None, kinds: Sequence[ResourceKind], first: str = "1 = 1"
    ) -> tuple[list[str], list[Any]]:
        clauses: list[str] = [first]
        params: list[Any] = []
        if scope is not None:
            clauses.append("scope = %s")
            params.append(scope.key)
        if kinds:
            clause, more = self.dialect.in_list("kind", list(kinds))
            clauses.append(clause)
            params += more
        return clauses, params

    def add(self, resource: NewResource) -> int:
        now = utc_now()
        head, tail = self.dialect.insert_ignore(
            "resource (uid, scope, kind, uri, content_hash, mtime, size, tags, source, "
            "created_at, updated_at, metadata)",
            "resource_id",
        )
        self._conn.execute(
            f"{head} VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s){tail}",
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
        row = self._conn.execute(
            "SELECT resource_id FROM resource WHERE uid = %s", (resource.uid,)
        ).fetchone()
        assert row is not None
        return int(row[0])

    def _select(self, where: str, params: Sequence[Any]) -> list[Resource]:
        return [
            row_to_resource(r)
            for r in self._conn.execute(
                f"SELECT {RESOURCE_COLUMNS} FROM resource WHERE {where}", list(params)
            )
        ]

    def get(self, resource_ids: Sequence[int]) -> dict[int, Resource]:
        ids = list(dict.fromkeys(int(i) for i in resource_ids))
        where, params = self.dialect.in_list("resource_id", ids)
        return {r.resource_id: r for r in self._select(where, params)} if ids else {}

    def by_uid(self, uids: Sequence[str]) -> dict[str, Resource]:
        unique = list(dict.fromkeys(uids))
        where, params = self.dialect.in_list("uid", unique)
        return {r.uid: r for r in self._select(where, params)} if unique else {}

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
        clauses, params = self._where(scope, kinds)
        if uri is not None:
            clauses.append("uri = %s")
            params.append(uri)
        if uri_prefix is not None:
            clauses.append("left(uri, %s) = %s")
            params.extend([len(uri_prefix), uri_prefix])
        if uid_prefix is not None:
            clauses.append("left(uid, %s) = %s")
            params.extend([len(uid_prefix), uid_prefix])
        for key, value in (meta or {}).items():
            _check_meta_key(key)
            # On PostgreSQL this matches the expression index resource_scope_kind_rule.
            clauses.append(f"{self.dialect.json_text('metadata', key)} = %s")
            params.append(str(value))
        if not include_deleted:
            clauses.append("deleted = 0")
        sql = " AND ".join(clauses) + " ORDER BY scope, uri, resource_id"
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
        d = self.dialect
        join_on = "item.resource_id = resource.resource_id AND item.deleted = 0"
        params: list[Any] = []
        if item_kinds:
            clause, params = d.in_list("item.kind", list(item_kinds))
            join_on += f" AND {clause}"
        clauses = ["resource.scope = %s", "resource.deleted = 0"]
        params.append(scope.key)
        if kinds:
            clause, more = d.in_list("resource.kind", list(kinds))
            clauses.append(clause)
            params += more
        if where is not None:
            compiled = compile_filter(where, d)
            clauses.append(f"({compiled.sql})")
            params.extend(compiled.params)
        source = f"FROM resource LEFT JOIN item ON {join_on} WHERE {' AND '.join(clauses)}"
        total = self._conn.execute(
            f"SELECT count(DISTINCT resource.resource_id) {source}", params
        ).fetchone()
        order = ""
        if order_by:
            column = order_column(order_by, d)
            aggregate = f"max({column})" if order_by.startswith("item.") else f"min({column})"
            order = f"{aggregate} {'DESC' if descending else 'ASC'}{d.nulls(descending)}, "
        rows = self._conn.execute(
            f"SELECT resource.resource_id {source} GROUP BY resource.resource_id "
            f"ORDER BY {order}resource.resource_id LIMIT %s OFFSET %s",
            (*params, max(0, int(limit)), max(0, int(offset))),
        ).fetchall()
        return [int(r[0]) for r in rows], int(total[0]) if total else 0

    def totals(self, scope: Scope | None, *, kinds: Sequence[ResourceKind] = ()) -> ResourceTotals:
        clauses, params = self._where(scope, kinds)
        row = self._conn.execute(
            "SELECT sum(CASE WHEN deleted = 0 THEN 1 ELSE 0 END), "
            "sum(CASE WHEN deleted = 1 THEN 1 ELSE 0 END), "
            "coalesce(sum(CASE WHEN deleted = 0 THEN size END), 0), "
            "max(CASE WHEN deleted = 0 THEN mtime END) "
            f"FROM resource WHERE {' AND '.join(clauses)}",
            params,
        ).fetchone()
        assert row is not None
        return ResourceTotals(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0), row[3])

    def update(self, resource_id: int, update: ResourceUpdate) -> bool:
        columns, params = resource_assignments(update, "%s")
        cursor = self._conn.execute(
            f"UPDATE resource SET {', '.join(columns)} WHERE resource_id = %s",
            (*params, resource_id),
        )
        return bool(cursor.rowcount)

    def delete(self, resource_ids: Sequence[int]) -> int:
        ids = sorted({int(i) for i in resource_ids})
        if not ids:
            return 0
        where, params = self.dialect.in_list("resource_id", ids)
        items = [
            int(r[0]) for r in self._conn.execute(f"SELECT item_id FROM item WHERE {where}", params)
        ]
        self._delete_items(items)
        self._detach(ids)
        return int(self._conn.execute(f"DELETE FROM resource WHERE {where}", params).rowcount)

    def count(self, scope: Scope | None, *, kinds: Sequence[ResourceKind] = ()) -> int:
        clauses, params = self._where(scope, kinds, "deleted = 0")
        row = self._conn.execute(
            f"SELECT count(*) FROM resource WHERE {' AND '.join(clauses)}", params
        ).fetchone()
        return int(row[0]) if row else 0
