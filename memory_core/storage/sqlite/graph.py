"""The graph on SQLite: ``entity``, ``relation`` and ``observation``.

Entities are found by ``(scope, kind, norm_name)`` (a unique index, so concurrent writers
converge on one row); relations connect entities and items and are unique per
(scope, source, type, target). Which edges exist is decided by the features (pure code that
computes a diff); this module only applies it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from memory_core.models import Edge, Entity, NewEntity, utc_now
from memory_core.scope import Scope

__all__ = ["SqliteGraph"]

_ENTITY_COLUMNS = "entity_id, scope, kind, norm_name, name, resource_id, created_at, metadata"
_BATCH = 400
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


def _edge_key(edge: Edge) -> tuple[str, int, str, str, int]:
    # The dataclass order, as a tuple: sorting thousands of edges by their generated __lt__
    # costs a Python call per comparison.
    return (edge.src_kind, edge.src_id, edge.rel_type, edge.dst_kind, edge.dst_id)


def _version_key(scope: Scope) -> str:
    return f"graph_version:{scope.key}"


class SqliteGraph:
    """:class:`~memory_core.storage.ports.GraphRepository` on one SQLite connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def ensure_entities(
        self, scope: Scope, entities: Sequence[NewEntity]
    ) -> dict[tuple[str, str], int]:
        found: dict[tuple[str, str], int] = {}
        wanted = {(e.kind, e.key): e for e in entities}
        by_kind: dict[str, list[str]] = {}
        for kind, key in wanted:
            by_kind.setdefault(kind, []).append(key)
        for kind, keys in by_kind.items():
            for start in range(0, len(keys), _BATCH):
                batch = keys[start : start + _BATCH]
                marks = ",".join("?" * len(batch))
                for entity_id, key in self._conn.execute(
                    "SELECT entity_id, norm_name FROM entity "
                    f"WHERE scope = ? AND kind = ? AND norm_name IN ({marks})",
                    (scope.key, kind, *batch),
                ):
                    found[(kind, str(key))] = int(entity_id)
        now = utc_now()
        for ident, entity in wanted.items():
            if ident in found:
                continue
            cursor = self._conn.execute(
                "INSERT INTO entity (scope, kind, name, norm_name, resource_id, created_at, "
                "metadata) VALUES (?,?,?,?,?,?,?)",
                (
                    scope.key,
                    entity.kind,
                    entity.name[:_NAME_CHARS],
                    entity.key,
                    entity.resource_id,
                    now,
                    json.dumps(entity.metadata, ensure_ascii=False, sort_keys=True),
                ),
            )
            found[ident] = int(cursor.lastrowid)
        return found

    def get_entities(self, entity_ids: Sequence[int]) -> dict[int, Entity]:
        found: dict[int, Entity] = {}
        ids = list(dict.fromkeys(int(i) for i in entity_ids))
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            for row in self._conn.execute(
                f"SELECT {_ENTITY_COLUMNS} FROM entity "
                f"WHERE entity_id IN ({','.join('?' * len(batch))})",
                batch,
            ):
                found[int(row[0])] = _entity(row)
        return found

    def find_entities(
        self,
        scope: Scope,
        *,
        kinds: Sequence[str] = (),
        keys: Sequence[str] = (),
        resource_id: int | None = None,
        limit: int | None = None,
    ) -> list[Entity]:
        clauses, params = ["scope = ?"], [scope.key]
        if kinds:
            clauses.append(f"kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        if keys:
            clauses.append(f"norm_name IN ({','.join('?' * len(keys))})")
            params.extend(keys)
        if resource_id is not None:
            clauses.append("resource_id = ?")
            params.append(resource_id)  # type: ignore[arg-type]
        # By resource: '+' keeps the planner on the (resource_id, kind) index rather than
        # walking the scope's (scope, kind, norm_name) index for its order.
        order = (
            "+kind, +norm_name, entity_id"
            if resource_id is not None
            else "kind, norm_name, entity_id"
        )
        sql = f"SELECT {_ENTITY_COLUMNS} FROM entity WHERE {' AND '.join(clauses)} ORDER BY {order}"
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
            columns.append("name = ?")
            params.append(name[:_NAME_CHARS])
        if metadata is not None:
            columns.append("metadata = ?")
            params.append(json.dumps(metadata, ensure_ascii=False, sort_keys=True))
        if resource_id is not None:
            columns.append("resource_id = ?")
            params.append(resource_id)
        if not columns:
            return (
                self._conn.execute(
                    "SELECT 1 FROM entity WHERE entity_id = ?", (entity_id,)
                ).fetchone()
                is not None
            )
        cursor = self._conn.execute(
            f"UPDATE entity SET {', '.join(columns)} WHERE entity_id = ?", (*params, entity_id)
        )
        return bool(cursor.rowcount)

    def delete_entities(self, entity_ids: Sequence[int]) -> int:
        ids = [(int(i),) for i in entity_ids]
        if not ids:
            return 0
        # Within the entity's own scope, so the relation indexes (which lead with scope) find
        # its edges instead of scanning every scope's relations once per entity.
        own_scope = "scope = (SELECT scope FROM entity WHERE entity_id = ?1)"
        self._conn.executemany(
            f"DELETE FROM relation WHERE {own_scope} AND src_kind = 'entity' AND src_id = ?1", ids
        )
        self._conn.executemany(
            f"DELETE FROM relation WHERE {own_scope} AND dst_kind = 'entity' AND dst_id = ?1", ids
        )
        self._conn.executemany("DELETE FROM observation WHERE entity_id = ?", ids)
        before = self._conn.total_changes
        self._conn.executemany("DELETE FROM entity WHERE entity_id = ?", ids)
        return int(self._conn.total_changes - before)

    def edges(
        self,
        scope: Scope,
        *,
        sources: Sequence[tuple[str, int]] = (),
        targets: Sequence[tuple[str, int]] = (),
        rel_types: Sequence[str] = (),
    ) -> set[Edge]:
        select = "SELECT src_kind, src_id, rel_type, dst_kind, dst_id FROM relation WHERE scope = ?"
        types = ""
        type_params: list[Any] = []
        if rel_types:
            types = f" AND rel_type IN ({','.join('?' * len(rel_types))})"
            type_params = list(rel_types)
        found: set[Edge] = set()

        def run(sql: str, params: Sequence[Any]) -> None:
            found.update(
                Edge(r[0], int(r[1]), str(r[2]), r[3], int(r[4]))
                for r in self._conn.execute(sql, params)
            )

        if not sources and not targets:
            run(select + types, [scope.key, *type_params])
            return found
        # By target: name the (scope, dst_kind, dst_id) index, or the planner walks the scope's
        # part of the covering unique index (a scan of the scope's edges per call).
        by_target = select.replace("FROM relation", "FROM relation INDEXED BY relation_dst")
        for column, endpoints in (("src", sources), ("dst", targets)):
            head = select if column == "src" else by_target
            by_kind: dict[str, list[int]] = {}
            for kind, ident in endpoints:
                by_kind.setdefault(kind, []).append(int(ident))
            for kind, ids in by_kind.items():
                for start in range(0, len(ids), _BATCH):
                    batch = ids[start : start + _BATCH]
                    run(
                        head
                        + f" AND {column}_kind = ? AND {column}_id IN ({','.join('?' * len(batch))})"
                        + types,
                        [scope.key, kind, *batch, *type_params],
                    )
        return found

    def apply_edges(self, scope: Scope, *, add: Iterable[Edge], remove: Iterable[Edge]) -> int:
        stale = sorted(set(remove), key=_edge_key)
        self._conn.executemany(
            "DELETE FROM relation WHERE scope = ? AND src_kind = ? AND src_id = ? "
            "AND rel_type = ? AND dst_kind = ? AND dst_id = ?",
            [(scope.key, e.src_kind, e.src_id, e.rel_type, e.dst_kind, e.dst_id) for e in stale],
        )
        before = self._conn.total_changes
        now = utc_now()
        self._conn.executemany(
            "INSERT OR IGNORE INTO relation (scope, src_kind, src_id, rel_type, dst_kind, dst_id, "
            "created_at) VALUES (?,?,?,?,?,?,?)",
            [
                (scope.key, e.src_kind, e.src_id, e.rel_type, e.dst_kind, e.dst_id, now)
                for e in sorted(set(add), key=_edge_key)
            ],
        )
        return int(self._conn.total_changes - before)

    def orphans(self, scope: Scope, entity_ids: Iterable[int]) -> list[int]:
        ids = sorted({int(i) for i in entity_ids})
        orphaned: list[int] = []
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            orphaned.extend(
                int(r[0])
                for r in self._conn.execute(
                    # '+scope': look the ids up by key, not by walking the scope's entities.
                    f"SELECT entity_id FROM entity WHERE entity_id IN ({marks}) AND +scope = ? "
                    "AND NOT EXISTS (SELECT 1 FROM relation WHERE relation.scope = entity.scope "
                    "AND src_kind = 'entity' AND src_id = entity.entity_id) "
                    "AND NOT EXISTS (SELECT 1 FROM relation WHERE relation.scope = entity.scope "
                    "AND dst_kind = 'entity' AND dst_id = entity.entity_id)",
                    (*batch, scope.key),
                )
            )
        return orphaned

    def add_observations(self, scope: Scope, entity_id: int, texts: Sequence[str]) -> list[int]:
        existing = {
            str(r[0]): int(r[1])
            for r in self._conn.execute(
                "SELECT text, observation_id FROM observation WHERE entity_id = ?", (entity_id,)
            )
        }
        ids: list[int] = []
        now = utc_now()
        for text in texts:
            if text in existing:
                continue
            cursor = self._conn.execute(
                "INSERT INTO observation (scope, entity_id, text, created_at) VALUES (?,?,?,?)",
                (scope.key, entity_id, text, now),
            )
            existing[text] = int(cursor.lastrowid)
            ids.append(existing[text])
        return ids

    def observations(self, entity_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        found: dict[int, list[tuple[int, str]]] = {}
        ids = list(dict.fromkeys(int(i) for i in entity_ids))
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            for entity_id, observation_id, text in self._conn.execute(
                "SELECT entity_id, observation_id, text FROM observation "
                f"WHERE entity_id IN ({','.join('?' * len(batch))}) ORDER BY observation_id",
                batch,
            ):
                found.setdefault(int(entity_id), []).append((int(observation_id), str(text)))
        return found

    def delete_observations(self, observation_ids: Sequence[int]) -> int:
        before = self._conn.total_changes
        self._conn.executemany(
            "DELETE FROM observation WHERE observation_id = ?", [(int(i),) for i in observation_ids]
        )
        return int(self._conn.total_changes - before)

    def version(self, scope: Scope) -> int:
        row = self._conn.execute(
            "SELECT value FROM meta WHERE key = ?", (_version_key(scope),)
        ).fetchone()
        return int(row[0]) if row else 0

    def bump_version(self, scope: Scope) -> None:
        self._conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            (_version_key(scope),),
        )
