"""The category tree on SQLite: the ``category`` table (unique on scope, parent, norm_name)."""

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

__all__ = ["SqliteCategories"]

_COLUMNS = CATEGORY_COLUMNS
_category = category_from_row


class SqliteCategories:
    """:class:`~memory_core.storage.ports.CategoryRepository` on one SQLite connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def children(
        self, scope: Scope, parent_id: int | None, *, level: int | None = None
    ) -> list[Category]:
        where = ["scope = ?", "parent_id IS NULL" if parent_id is None else "parent_id = ?"]
        params: list[Any] = [scope.key] if parent_id is None else [scope.key, parent_id]
        if level is not None:
            where.append("level = ?")
            params.append(level)
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM category WHERE {' AND '.join(where)} "
            "ORDER BY norm_name, category_id",
            params,
        ).fetchall()
        return [_category(r) for r in rows]

    def all(self, scope: Scope) -> list[Category]:
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM category WHERE scope = ? "
            "ORDER BY level, ifnull(parent_id, 0), norm_name, category_id",
            (scope.key,),
        ).fetchall()
        return [_category(r) for r in rows]

    def get(self, category_ids: Sequence[int]) -> dict[int, Category]:
        ids = list(dict.fromkeys(int(i) for i in category_ids))
        found: dict[int, Category] = {}
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            for row in self._conn.execute(
                f"SELECT {_COLUMNS} FROM category "
                f"WHERE category_id IN ({','.join('?' * len(batch))})",
                batch,
            ):
                found[int(row[0])] = _category(row)
        return found

    def count(self, scope: Scope) -> int:
        return int(
            self._conn.execute(
                "SELECT count(*) FROM category WHERE scope = ?", (scope.key,)
            ).fetchone()[0]
        )

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
                f"SELECT {_COLUMNS} FROM category WHERE category_id = ?", (parent_id,)
            ).fetchone()
            parent = _category(row) if row else None
        check_level_parent(scope, level, parent_id, parent)
        norm = normalise_category_name(shown)
        self._conn.execute(
            "INSERT INTO category (scope, parent_id, level, name, norm_name, summary, created_at, "
            "metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
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
            "WHERE scope = ? AND ifnull(parent_id, 0) = ? AND norm_name = ?",
            (scope.key, parent_id or 0, norm),
        ).fetchone()
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
            columns += ["name = ?", "norm_name = ?"]
            params += [shown, normalise_category_name(shown)]
        if summary is not None:
            columns.append("summary = ?")
            params.append(summary)
        if metadata is not None:
            columns.append("metadata = ?")
            params.append(json.dumps(metadata, ensure_ascii=False, sort_keys=True))
        if not columns:
            return bool(self.get([category_id]))
        try:
            cursor = self._conn.execute(
                f"UPDATE category SET {', '.join(columns)} WHERE category_id = ?",
                (*params, category_id),
            )
        except Exception as exc:
            if "UNIQUE" in str(exc):
                raise InvalidInputError(
                    f"another category under the same parent is already named {name!r}",
                    hint="choose another name, or move the items into that category",
                ) from exc
            raise
        return bool(cursor.rowcount)

    def delete(self, category_ids: Sequence[int]) -> int:
        ids = [int(i) for i in category_ids]
        for category_id in ids:
            child = self._conn.execute(
                "SELECT 1 FROM category WHERE parent_id = ? LIMIT 1", (category_id,)
            ).fetchone()
            if child is not None:
                raise InvalidInputError(
                    f"category {category_id} still has child categories",
                    hint="delete or move the children first",
                )
        self._conn.executemany(
            "UPDATE item SET category_id = NULL WHERE category_id = ?", [(i,) for i in ids]
        )
        before = self._conn.total_changes
        self._conn.executemany("DELETE FROM category WHERE category_id = ?", [(i,) for i in ids])
        return int(self._conn.total_changes - before)

    def item_counts(self, scope: Scope, *, kinds: Sequence[ItemKind] = ()) -> dict[int, int]:
        where, params = "scope = ? AND deleted = 0 AND category_id IS NOT NULL", [scope.key]
        if kinds:
            where += f" AND kind IN ({','.join('?' * len(kinds))})"
            params.extend(kinds)
        rows = self._conn.execute(
            f"SELECT category_id, count(*) FROM item WHERE {where} GROUP BY category_id", params
        )
        return {int(r[0]): int(r[1]) for r in rows}
