"""The graph on PostgreSQL: ``entity``, ``relation`` and ``observation``.

Entities are found by ``(scope, kind, norm_name)`` (a unique index: concurrent writers
converge on one row through ``ON CONFLICT``); which edges exist is decided by the features,
this module only applies the diff.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from memory_core.models import Edge, Entity, NewEntity, utc_now
from memory_core.scope import Scope

__all__ = ["PgGraph"]

_ENTITY_COLUMNS = "entity_id, scope, kind, norm_name, name, resource_id, created_at, metadata"
_NAME_CHARS = 500


def _entity(row: Sequence[Any]) -> Entity:
    return Entity(
        entity_id=int(row[0]),
        scope=str(row[1]),
        kind=str(row[2]),
        key=str(row[3]),
        name=str(row[4]),
        resource_id=row[5],
        created_at=str(row[6]),
        metadata=json.loads(row[7]),
    )


def _version_key(scope: Scope) -> str:
    return f"graph_version:{scope.key}"


class PgGraph:
    """:class:`~memory_core.storage.ports.GraphRepository` on one PostgreSQL connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def ensure_entities(
        self, scope: Scope, entities: Sequence[NewEntity]
    ) -> dict[tuple[str, str], int]:
        wanted = {(e.kind, e.key): e for e in entities}
        if not wanted:
            return {}
        now = utc_now()
        self._conn.cursor().executemany(
            "INSERT INTO entity (scope, kind, name, norm_name, resource_id, created_at, metadata) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (scope, kind, norm_name) DO NOTHING",
            [
                (
                    scope.key,
                    e.kind,
                    e.name[:_NAME_CHARS],
                    e.key,
                    e.resource_id,
                    now,
                    json.dumps(e.metadata, ensure_ascii=False, sort_keys=True),
                )
                for _, e in sorted(wanted.items())
            ],
        )
        kinds = [k for k, _ in wanted]
        keys = [key for _, key in wanted]
        found: dict[tuple[str, str], int] = {}
        for entity_id, kind, key in self._conn.execute(
            "SELECT entity_id, kind, norm_name FROM entity WHERE scope = %s AND (kind, norm_name) "
            "IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            (scope.key, kinds, keys),
        ):
            found[(str(kind), str(key))] = int(entity_id)
        return found

    def get_entities(self, entity_ids: Sequence[int]) -> dict[int, Entity]:
        ids = list(dict.fromkeys(int(i) for i in entity_ids))
        if not ids:
            return {}
        rows = self._conn.execute(
            f"SELECT {_ENTITY_COLUMNS} FROM entity WHERE entity_id = ANY(%s)", (ids,)
        )
        return {int(r[0]): _entity(r) for r in rows}

    def find_entities(
        self,
        scope: Scope,
        *,
        kinds: Sequence[str] = (),
        keys: Sequence[str] = (),
        resource_id: int | None = None,
        limit: int | None = None,
    ) -> list[Entity]:
        clauses: list[str] = ["scope = %s"]
        params: list[Any] = [scope.key]
        if kinds:
            clauses.append("kind = ANY(%s)")
            params.append(list(kinds))
        if keys:
            clauses.append("norm_name = ANY(%s)")
            params.append(list(keys))
        if resource_id is not None:
            clauses.append("resource_id = %s")
            params.append(resource_id)
        sql = (
            f"SELECT {_ENTITY_COLUMNS} FROM entity WHERE {' AND '.join(clauses)} "
            "ORDER BY kind, norm_name, entity_id"
        )
        if limit is not None:
            sql += f" LIMIT {max(0, int(limit))}"
        return [_entity(r) for r in self._conn.execute(sql, params)]

    def update_entity(
        self,
        entity_id: int,
        *,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        resource_id: int | None = None,
    ) -> bool:
        columns: list[str] = []
        params: list[Any] = []
        if name is not None:
            columns.append("name = %s")
            params.append(name[:_NAME_CHARS])
        if metadata is not None:
            columns.append("metadata = %s")
            params.append(json.dumps(metadata, ensure_ascii=False, sort_keys=True))
        if resource_id is not None:
            columns.append("resource_id = %s")
            params.append(resource_id)
        if not columns:
            return (
                self._conn.execute(
                    "SELECT 1 FROM entity WHERE entity_id = %s", (entity_id,)
                ).fetchone()
                is not None
            )
        cursor = self._conn.execute(
            f"UPDATE entity SET {', '.join(columns)} WHERE entity_id = %s", (*params, entity_id)
        )
        return bool(cursor.rowcount)

    def delete_entities(self, entity_ids: Sequence[int]) -> int:
        ids = sorted({int(i) for i in entity_ids})
        if not ids:
            return 0
        self._conn.execute(
            "DELETE FROM relation WHERE src_kind = 'entity' AND src_id = ANY(%s)", (ids,)
        )
        self._conn.execute(
            "DELETE FROM relation WHERE dst_kind = 'entity' AND dst_id = ANY(%s)", (ids,)
        )
        self._conn.execute("DELETE FROM observation WHERE entity_id = ANY(%s)", (ids,))
        return self._conn.execute("DELETE FROM entity WHERE entity_id = ANY(%s)", (ids,)).rowcount

    def edges(
        self,
        scope: Scope,
        *,
        sources: Sequence[tuple[str, int]] = (),
        targets: Sequence[tuple[str, int]] = (),
        rel_types: Sequence[str] = (),
    ) -> set[Edge]:
        select = (
            "SELECT src_kind, src_id, rel_type, dst_kind, dst_id FROM relation WHERE scope = %s"
        )
        types = ""
        type_params: list[Any] = []
        if rel_types:
            types = " AND rel_type = ANY(%s)"
            type_params = [list(rel_types)]
        found: set[Edge] = set()

        def run(sql: str, params: Sequence[Any]) -> None:
            found.update(
                Edge(r[0], int(r[1]), str(r[2]), r[3], int(r[4]))
                for r in self._conn.execute(sql, list(params))
            )

        if not sources and not targets:
            run(select + types, [scope.key, *type_params])
            return found
        for column, endpoints in (("src", sources), ("dst", targets)):
            by_kind: dict[str, list[int]] = {}
            for kind, ident in endpoints:
                by_kind.setdefault(kind, []).append(int(ident))
            for kind, ids in by_kind.items():
                run(
                    select + f" AND {column}_kind = %s AND {column}_id = ANY(%s)" + types,
                    [scope.key, kind, ids, *type_params],
                )
        return found

    def apply_edges(self, scope: Scope, *, add: Iterable[Edge], remove: Iterable[Edge]) -> int:
        stale = sorted(set(remove))
        if stale:
            self._conn.cursor().executemany(
                "DELETE FROM relation WHERE scope = %s AND src_kind = %s AND src_id = %s "
                "AND rel_type = %s AND dst_kind = %s AND dst_id = %s",
                [
                    (scope.key, e.src_kind, e.src_id, e.rel_type, e.dst_kind, e.dst_id)
                    for e in stale
                ],
            )
        fresh = sorted(set(add))
        if not fresh:
            return 0
        now = utc_now()
        row = self._conn.execute(
            "WITH added AS (INSERT INTO relation (scope, src_kind, src_id, rel_type, dst_kind, "
            "dst_id, created_at) SELECT %s, s, si, r, d, di, %s FROM unnest(%s::text[], "
            "%s::bigint[], %s::text[], %s::text[], %s::bigint[]) AS e(s, si, r, d, di) "
            "ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*) FROM added",
            (
                scope.key,
                now,
                [e.src_kind for e in fresh],
                [e.src_id for e in fresh],
                [e.rel_type for e in fresh],
                [e.dst_kind for e in fresh],
                [e.dst_id for e in fresh],
            ),
        ).fetchone()
        return int(row[0]) if row else 0

    def orphans(self, scope: Scope, entity_ids: Iterable[int]) -> list[int]:
        ids = sorted({int(i) for i in entity_ids})
        if not ids:
            return []
        return [
            int(r[0])
            for r in self._conn.execute(
                "SELECT entity_id FROM entity WHERE entity_id = ANY(%s) AND scope = %s "
                "AND NOT EXISTS (SELECT 1 FROM relation WHERE relation.scope = entity.scope "
                "AND src_kind = 'entity' AND src_id = entity.entity_id) "
                "AND NOT EXISTS (SELECT 1 FROM relation WHERE relation.scope = entity.scope "
                "AND dst_kind = 'entity' AND dst_id = entity.entity_id) ORDER BY entity_id",
                (ids, scope.key),
            )
        ]

    def add_observations(self, scope: Scope, entity_id: int, texts: Sequence[str]) -> list[int]:
        existing = {
            str(r[0])
            for r in self._conn.execute(
                "SELECT text FROM observation WHERE entity_id = %s", (entity_id,)
            )
        }
        ids: list[int] = []
        now = utc_now()
        for text in texts:
            if text in existing:
                continue
            row = self._conn.execute(
                "INSERT INTO observation (scope, entity_id, text, created_at) "
                "VALUES (%s,%s,%s,%s) RETURNING observation_id",
                (scope.key, entity_id, text, now),
            ).fetchone()
            assert row is not None
            existing.add(text)
            ids.append(int(row[0]))
        return ids

    def observations(self, entity_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        ids = list(dict.fromkeys(int(i) for i in entity_ids))
        found: dict[int, list[tuple[int, str]]] = {}
        if not ids:
            return found
        for entity_id, observation_id, text in self._conn.execute(
            "SELECT entity_id, observation_id, text FROM observation "
            "WHERE entity_id = ANY(%s) ORDER BY observation_id",
            (ids,),
        ):
            found.setdefault(int(entity_id), []).append((int(observation_id), str(text)))
        return found

    def delete_observations(self, observation_ids: Sequence[int]) -> int:
        ids = [int(i) for i in observation_ids]
        if not ids:
            return 0
        return self._conn.execute(
            "DELETE FROM observation WHERE observation_id = ANY(%s)", (ids,)
        ).rowcount

    def version(self, scope: Scope) -> int:
        row = self._conn.execute(
            "SELECT value FROM meta WHERE key = %s", (_version_key(scope),)
        ).fetchone()
        return int(row[0]) if row else 0

    def bump_version(self, scope: Scope) -> None:
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (%s, '1') "
            "ON CONFLICT (key) DO UPDATE SET value = (meta.value::bigint + 1)::text",
            (_version_key(scope),),
        )
