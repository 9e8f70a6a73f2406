"""The category tree on a server backend: ``category`` (unique on scope, parent, norm_name)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memory_core.categories import check_category_name, check_level_parent, normalise_category_name
from memory_core.errors import InvalidInputError
from memory_core.kinds import ItemKind
from memory_core.models import Category, utc_now
from memory_core.scope import Scope
from memory_core.storage.records import CATEGORY_COLUMNS, category_from_row
from memory_core.storage.server.dialect import Dialect

__all__ = ["ServerCategories"]

_COLUMNS = CATEGORY_COLUMNS
_category = category_from_row


class ServerCategories:
    """:class:`~memory_core.storage.ports.CategoryRepository` on one server connection."""

    dialect: Dialect

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def children(
        self, scope: Scope, parent_id: int | None, *, level: int | None = None
    ) -> list[Category]:
        where = ["scope = %s", "parent_id IS NULL" if parent_id is None else "parent_id = %s"]
        params: list[Any] = [scope.key] if parent_id is None else [scope.key, parent_id]
        if level is not None:
            where.append("level = %s")
            params.append(level)
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM category WHERE {' AND '.join(where)} "
            "ORDER BY norm_name, category_id",
            params,
        ).fetchall()
        return [_category(r) for r in rows]

    def all(self, scope: Scope) -> list[Category]:
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM category WHERE scope = %s "
            "ORDER BY level, coalesce(parent_id, 0), norm_name, category_id",
            (scope.key,),
        ).fetchall()
        return [_category(r) for r in rows]

    def get(self, category_ids: Sequence[int]) -> dict[int, Category]:
        ids = list(dict.fromkeys(int(i) for i in category_ids))
        if not ids:
            return {}
        where, params = self.dialect.in_list("category_id", ids)
        rows = self._conn.execute(f"SELECT {_COLUMNS} FROM category WHERE {where}", params)
        return {int(r[0]): _category(r) for r in rows}

    def count(self, scope: Scope) -> int:
        row = self._conn.execute(
            "SELECT count(*) FROM category WHERE scope = %s", (scope.key,)
        ).fetchone()
        return int(row[0]) if row else 0

    def create(
        self,
        scope: Scope,
        *,
        parent_id: int | None,
        level: int,
        name: str,
        summary: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Category:
        shown = check_category_name(name)
        parent = None
        if parent_id is not None:
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM category WHERE category_id = %s", (parent_id,)
            ).fetchone()
            parent = _category(row) if row else None
        check_level_parent(scope, level, parent_id, parent)
        norm = normalise_category_name(shown)
        head, tail = self.dialect.insert_ignore(
            "category (scope, parent_id, level, name, norm_name, summary, created_at, metadata)",
            "category_id",
        )
        self._conn.execute(
            f"{head} VALUES (%s, %s, %s, %s, %s, %s, %s, %s){tail}",
            (
                scope.key,
                parent_id,
                level,
                shown,
                norm,
                summary,
                utc_now(),
                json.dumps(metadata or {}, ensure_ascii=False, sort_keys=True),
            ),
        )
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM category "
            "WHERE scope = %s AND coalesce(parent_id, 0) = %s AND norm_name = %s",
            (scope.key, parent_id or 0, norm),
        ).fetchone()
        assert row is not None
        return _category(row)

    def update(
        self,
        category_id: int,
        *,
        name: str | None = None,
        summary: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        columns: list[str] = []
        params: list[Any] = []
        if name is not None:
            shown = check_category_name(name)
            columns += ["name = %s", "norm_name = %s"]
            params += [shown, normalise_category_name(shown)]
        if summary is not None:
            columns.append("summary = %s")
            params.append(summary)
        if metadata is not None:
            columns.append("metadata = %s")
            params.append(json.dumps(metadata, ensure_ascii=False, sort_keys=True))
        if not columns:
            return bool(self.get([category_id]))
        try:
            with self.dialect.savepoint(self._conn):  # the caller's transaction survives
                cursor = self._conn.execute(
                    f"UPDATE category SET {', '.join(columns)} WHERE category_id = %s",
                    (*params, category_id),
                )
        except Exception as exc:
            if not self.dialect.is_unique_violation(exc):
                raise
            raise InvalidInputError(
                f"another category under the same parent is already named {name!r}",
                hint="choose another name, or move the items into that category",
            ) from exc
        return bool(cursor.rowcount) or bool(self.get([category_id]))

    def delete(self, category_ids: Sequence[int]) -> int:
        ids = sorted({int(i) for i in category_ids})
        if not ids:
            return 0
        where, params = self.dialect.in_list("parent_id", ids)
        child = self._conn.execute(
            f"SELECT parent_id FROM category WHERE {where} ORDER BY parent_id LIMIT 1", params
        ).fetchone()
        if child is not None:
            raise InvalidInputError(
                f"category {child[0]} still has child categories",
                hint="delete or move the children first",
            )
        where, params = self.dialect.in_list("category_id", ids)
        self._conn.execute(f"UPDATE item SET category_id = NULL WHERE {where}", params)
        return int(self._conn.execute(f"DELETE FROM category WHERE {where}", params).rowcount)

    def item_counts(self, scope: Scope, *, kinds: Sequence[ItemKind] = ()) -> dict[int, int]:
        where = "scope = %s AND deleted = 0 AND category_id IS NOT NULL"
        params: list[Any] = [scope.key]
        if kinds:
            clause, more = self.dialect.in_list("kind", list(kinds))
            where += f" AND {clause}"
            params += more
        rows = self._conn.execute(
            f"SELECT category_id, count(*) FROM item WHERE {where} GROUP BY category_id", params
        )
        return {int(r[0]): int(r[1]) for r in rows}
