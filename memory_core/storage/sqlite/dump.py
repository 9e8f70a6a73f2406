"""Backup records of a SQLite store: every table as backend-neutral JSON objects, and back.

The format (``memoir-store/1``, described in :mod:`memory_core.backup`) carries no row ids:
references are natural keys (a resource or item by its ``uid``, an entity by ``(kind, key)``,
a category by its path of names), so a dump restores into any store, of any backend, and a
store restored from a dump dumps to the same bytes. Timestamps are kept as stored.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from memory_core.errors import InvalidInputError
from memory_core.storage.sqlite.items import (
    VEC_TABLE,
    bump_vector_generation,
    from_signed64,
    simhash_bands,
    to_signed64,
    vector_table_dimension,
)

__all__ = ["VOLATILE_META", "decode_embedding", "dump_rows", "restore_rows"]

Record = dict[str, Any]
# Meta keys that describe this store rather than its content (restored stores make their own).
VOLATILE_META = (
    "embedder_id",
    "embedding_dim",
    "vectors_generation",
    "graph_version",
    "rules_graph_version",
    "chunk_vectors_generation",
)


def _json(value: str | None) -> Any:
    return json.loads(value) if value else None


def _scope_where(scope_key: str | None, column: str = "scope") -> tuple[str, list[Any]]:
    return (f"WHERE {column} = ?", [scope_key]) if scope_key is not None else ("", [])


def _category_paths(conn: Any, scope_key: str | None) -> dict[int, list[str]]:
    where, params = _scope_where(scope_key)
    rows = conn.execute(
        f"SELECT category_id, parent_id, name FROM category {where} ORDER BY level", params
    ).fetchall()
    paths: dict[int, list[str]] = {}
    for category_id, parent_id, name in rows:
        paths[int(category_id)] = [*paths.get(int(parent_id or 0), []), str(name)]
    return paths


PageVectors = Callable[[Any, list[int]], dict[int, bytes]]
"""A backend's vectors of some items, as little-endian float32 bytes by item id."""


def _page_vectors(conn: Any, ids: list[int]) -> dict[int, bytes]:
    marks = ",".join("?" * len(ids))
    return {
        int(i): bytes(b)
        for i, b in conn.execute(
            f"SELECT item_id, embedding FROM {VEC_TABLE} WHERE item_id IN ({marks})", ids
        )
    }


def dump_rows(conn: Any, scope_key: str | None) -> Iterator[Record]:
    """Every row of the store (of one scope, or all) as records, in a deterministic order."""
    has_vectors = vector_table_dimension(conn) is not None
    return dump_records(conn, scope_key, _page_vectors if has_vectors else None)


def dump_records(
    conn: Any, scope_key: str | None, page_vectors: PageVectors | None
) -> Iterator[Record]:
    """The records of any backend whose schema is this one's: ``conn`` takes ``?`` markers;
    ``page_vectors`` reads a page's vectors (None when the store has no vector table)."""
    where, params = _scope_where(scope_key)
    resource_uid = {
        int(r[0]): str(r[1])
        for r in conn.execute(f"SELECT resource_id, uid FROM resource {where}", params)
    }
    for r in conn.execute(
        "SELECT scope, uid, kind, uri, content_hash, mtime, size, tags, source, created_at, "
        f"updated_at, deleted, metadata FROM resource {where} ORDER BY scope, uid",
        params,
    ):
        yield {
            "type": "resource", "scope": r[0], "uid": r[1], "kind": r[2], "uri": r[3],
            "content_hash": r[4], "mtime": r[5], "size": r[6], "tags": _json(r[7]),
            "source": r[8], "created_at": r[9], "updated_at": r[10], "deleted": bool(r[11]),
            "metadata": _json(r[12]),
        }  # fmt: skip
    paths = _category_paths(conn, scope_key)
    categories = conn.execute(
        f"SELECT category_id, scope, level, name, summary, created_at, metadata FROM category {where}",
        params,
    ).fetchall()
    for r in sorted(categories, key=lambda r: (r[1], paths[int(r[0])])):
        yield {
            "type": "category", "scope": r[1], "path": paths[int(r[0])], "level": r[2],
            "name": r[3], "summary": r[4], "created_at": r[5], "metadata": _json(r[6]),
        }  # fmt: skip
    entity_key: dict[int, list[str]] = {}
    for r in conn.execute(
        "SELECT entity_id, scope, kind, norm_name, name, resource_id, created_at, metadata "
        f"FROM entity {where} ORDER BY scope, kind, norm_name",
        params,
    ):
        entity_key[int(r[0])] = [str(r[2]), str(r[3])]
        yield {
            "type": "entity", "scope": r[1], "kind": r[2], "key": r[3], "name": r[4],
            "resource": resource_uid.get(int(r[5])) if r[5] is not None else None,
            "created_at": r[6], "metadata": _json(r[7]),
        }  # fmt: skip
    item_uid: dict[int, str] = {}
    superseded: list[tuple[str, int]] = []
    last_uid = ""
    while True:
        # Pages in uid order; vectors fetched per page (a backup of 1M items stays bounded).
        page = conn.execute(
            "SELECT item_id, scope, uid, kind, resource_id, category_id, text, content_hash, "
            "start_offset, end_offset, start_line, end_line, token_count, simhash, importance, "
            "pinned, repeat_count, tags, created_at, updated_at, valid_from, valid_to, "
            "superseded_by, deleted, metadata FROM item "
            f"{where + ' AND' if where else 'WHERE'} uid > ? ORDER BY uid LIMIT 500",
            [*params, last_uid],
        ).fetchall()
        if not page:
            break
        last_uid = str(page[-1][2])
        vectors = page_vectors(conn, [int(r[0]) for r in page]) if page_vectors else {}
        for r in page:
            item_uid[int(r[0])] = str(r[2])
            if r[22] is not None:
                superseded.append((str(r[2]), int(r[22])))
            blob = vectors.get(int(r[0]))
            yield {
                "type": "item", "scope": r[1], "uid": r[2], "kind": r[3],
                "resource": resource_uid.get(int(r[4])) if r[4] is not None else None,
                "category": paths.get(int(r[5])) if r[5] is not None else None,
                "text": r[6], "content_hash": r[7], "start_offset": r[8], "end_offset": r[9],
                "start_line": r[10], "end_line": r[11], "token_count": r[12],
                "simhash": from_signed64(r[13]), "importance": r[14], "pinned": bool(r[15]),
                "repeat_count": r[16], "tags": _json(r[17]), "created_at": r[18],
                "updated_at": r[19], "valid_from": r[20], "valid_to": r[21],
                "deleted": bool(r[23]), "metadata": _json(r[24]),
                "embedding": base64.b64encode(blob).decode("ascii") if blob else None,
            }  # fmt: skip
    for uid, target in sorted(superseded):
        if target in item_uid:
            yield {"type": "supersede", "uid": uid, "superseded_by": item_uid[target]}

    def endpoint(kind: str, ident: int) -> list[str] | None:
        if kind == "item":
            uid = item_uid.get(ident)
            return None if uid is None else ["item", uid]
        key = entity_key.get(ident)
        return None if key is None else ["entity", *key]

    relations = []
    for r in conn.execute(
        "SELECT scope, src_kind, src_id, rel_type, dst_kind, dst_id, created_at, metadata "
        f"FROM relation {where}",
        params,
    ):
        src, dst = endpoint(r[1], int(r[2])), endpoint(r[4], int(r[5]))
        if src is not None and dst is not None:
            relations.append(
                {
                    "type": "relation",
                    "scope": r[0],
                    "src": src,
                    "rel_type": r[3],
                    "dst": dst,
                    "created_at": r[6],
                    "metadata": _json(r[7]),
                }
            )
    yield from sorted(relations, key=lambda x: (x["scope"], x["src"], x["rel_type"], x["dst"]))
    observations = []
    for r in conn.execute(
        f"SELECT scope, entity_id, text, created_at, observation_id FROM observation {where}",
        params,
    ):
        if int(r[1]) in entity_key:
            observations.append((r[0], entity_key[int(r[1])], r[3], int(r[4]), r[2]))
    # Insertion order within an entity is meaningful (observations are read back in it).
    for scope, key, created_at, _, text in sorted(observations):
        yield {"type": "observation", "scope": scope, "entity": key, "text": text,
               "created_at": created_at}  # fmt: skip
    for r in conn.execute(
        "SELECT scope, kind, uid, deleted_at, expires_at, payload FROM tombstone "
        f"{where} ORDER BY scope, kind, uid, deleted_at, tombstone_id",
        params,
    ):
        yield {"type": "tombstone", "scope": r[0], "kind": r[1], "uid": r[2],
               "deleted_at": r[3], "expires_at": r[4], "payload": _json(r[5])}  # fmt: skip
    for r in conn.execute(
        "SELECT scope, kind, subject, payload, created_at FROM event "
        f"{where} ORDER BY scope, created_at, event_id",
        params,
    ):
        yield {"type": "event", "scope": r[0], "kind": r[1], "subject": r[2],
               "payload": _json(r[3]), "created_at": r[4]}  # fmt: skip
    for r in conn.execute(
        "SELECT scope, kind, started_at, took_ms, payload FROM run "
        f"{where} ORDER BY scope, started_at, run_id",
        params,
    ):
        yield {"type": "run", "scope": r[0], "kind": r[1], "started_at": r[2],
               "took_ms": r[3], "payload": _json(r[4])}  # fmt: skip
    if scope_key is None:
        for key, value in conn.execute("SELECT key, value FROM meta ORDER BY key"):
            if not str(key).startswith(VOLATILE_META):
                yield {"type": "meta", "key": key, "value": value}


# -- restore -----------------------------------------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False, sort_keys=True)


def _need(record: Record, *names: str) -> None:
    missing = [n for n in names if n not in record]
    if missing:
        raise InvalidInputError(
            f"a {record.get('type')!r} record is missing {', '.join(missing)}",
            hint="import a file written by `memoir export`",
        )


class _Refs:
    """Natural keys to this store's ids, looked up in the transaction and remembered."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.resources: dict[str, int] = {}
        self.items: dict[str, int] = {}
        self.entities: dict[tuple[str, str, str], int] = {}
        self.categories: dict[tuple[str, tuple[str, ...]], int] = {}

    def resource(self, uid: str | None) -> int | None:
        if uid is None:
            return None
        if uid not in self.resources:
            row = self.conn.execute(
                "SELECT resource_id FROM resource WHERE uid = ?", (uid,)
            ).fetchone()
            if row is None:
                raise InvalidInputError(f"the backup names an unknown resource {uid!r}",
                                        hint="import the whole file, in its order")  # fmt: skip
            self.resources[uid] = int(row[0])
        return self.resources[uid]

    def item(self, uid: str) -> int | None:
        if uid not in self.items:
            row = self.conn.execute("SELECT item_id FROM item WHERE uid = ?", (uid,)).fetchone()
            if row is None:
                return None
            self.items[uid] = int(row[0])
        return self.items[uid]

    def entity(self, scope: str, kind: str, key: str) -> int | None:
        ident = (scope, kind, key)
        if ident not in self.entities:
            row = self.conn.execute(
                "SELECT entity_id FROM entity WHERE scope = ? AND kind = ? AND norm_name = ?", ident
            ).fetchone()
            if row is None:
                return None
            self.entities[ident] = int(row[0])
        return self.entities[ident]

    def category(self, scope: str, path: Sequence[str] | None) -> int | None:
        if not path:
            return None
        ident = (scope, tuple(path))
        if ident not in self.categories:
            from memory_core.categories import normalise_category_name

            parent: int | None = None
            for depth in range(len(path)):
                row = self.conn.execute(
                    "SELECT category_id FROM category WHERE scope = ? AND coalesce(parent_id, 0) = ? "
                    "AND norm_name = ?",
                    (scope, parent or 0, normalise_category_name(path[depth])),
                ).fetchone()
                if row is None:
                    return None
                parent = int(row[0])
            assert parent is not None
            self.categories[ident] = parent
        return self.categories[ident]


def restore_rows(
    conn: Any, records: Iterable[Record], *, decode_vector: Callable[[Record], bytes | None]
) -> dict[str, int]:
    """Insert ``records`` (one batch, one transaction); rows already present are kept.

    Args:
        decode_vector: the float32 blob to store for an item record (None: no vector).

    Returns:
        Rows written per record type.
    """
    from memory_core.categories import normalise_category_name

    refs = _Refs(conn)
    counts: dict[str, int] = {}
    dimension = vector_table_dimension(conn)
    scopes: set[str] = set()

    def wrote(kind: str, cursor: Any) -> None:
        counts[kind] = counts.get(kind, 0) + max(0, int(cursor.rowcount))

    for record in records:
        kind = record.get("type")
        if kind == "resource":
            _need(record, "scope", "uid", "kind", "uri", "content_hash", "created_at", "updated_at")
            wrote(kind, conn.execute(
                "INSERT INTO resource (uid, scope, kind, uri, content_hash, mtime, size, tags, "
                "source, created_at, updated_at, deleted, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(uid) DO NOTHING",
                (record["uid"], record["scope"], record["kind"], record["uri"],
                 record["content_hash"], record.get("mtime"), record.get("size"),
                 json.dumps(record.get("tags") or [], ensure_ascii=False), record.get("source"),
                 record["created_at"], record["updated_at"], int(bool(record.get("deleted"))),
                 _dumps(record.get("metadata"))),
            ))  # fmt: skip
        elif kind == "category":
            _need(record, "scope", "path", "level", "name", "created_at")
            path = list(record["path"])
            parent = refs.category(record["scope"], path[:-1]) if len(path) > 1 else None
            wrote(kind, conn.execute(
                "INSERT INTO category (scope, parent_id, level, name, norm_name, summary, "
                "created_at, metadata) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                (record["scope"], parent, record["level"], record["name"],
                 normalise_category_name(record["name"]), record.get("summary"),
                 record["created_at"], _dumps(record.get("metadata"))),
            ))  # fmt: skip
        elif kind == "entity":
            _need(record, "scope", "kind", "key", "name", "created_at")
            wrote(kind, conn.execute(
                "INSERT INTO entity (scope, kind, name, norm_name, resource_id, created_at, metadata) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                (record["scope"], record["kind"], record["name"], record["key"],
                 refs.resource(record.get("resource")), record["created_at"],
                 _dumps(record.get("metadata"))),
            ))  # fmt: skip
        elif kind == "item":
            _need(
                record,
                "scope",
                "uid",
                "kind",
                "text",
                "content_hash",
                "token_count",
                "created_at",
                "updated_at",
            )
            cursor = conn.execute(
                "INSERT INTO item (uid, scope, kind, resource_id, category_id, text, content_hash, "
                "start_offset, end_offset, start_line, end_line, token_count, simhash, importance, "
                "pinned, repeat_count, tags, created_at, updated_at, valid_from, valid_to, deleted, "
                "metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(uid) DO NOTHING",
                (record["uid"], record["scope"], record["kind"],
                 refs.resource(record.get("resource")),
                 refs.category(record["scope"], record.get("category")),
                 record["text"], record["content_hash"], record.get("start_offset"),
                 record.get("end_offset"), record.get("start_line"), record.get("end_line"),
                 record["token_count"], to_signed64(record.get("simhash")),
                 record.get("importance", 0.5), int(bool(record.get("pinned"))),
                 record.get("repeat_count", 0), json.dumps(record.get("tags") or [], ensure_ascii=False),
                 record["created_at"], record["updated_at"], record.get("valid_from"),
                 record.get("valid_to"), int(bool(record.get("deleted"))),
                 _dumps(record.get("metadata"))),
            )  # fmt: skip
            wrote(kind, cursor)
            if not cursor.rowcount:
                continue
            item_id = int(cursor.lastrowid)
            refs.items[record["uid"]] = item_id
            scopes.add(record["scope"])
            conn.execute(
                "INSERT INTO item_fts(rowid, text, tags) VALUES (?,?,?)",
                (item_id, record["text"], " ".join(record.get("tags") or [])),
            )
            blob = decode_vector(record)
            if blob is not None and dimension is not None:
                if len(blob) != 4 * dimension:
                    raise InvalidInputError(
                        f"item {record['uid']!r} has a vector of {len(blob) // 4} dimensions, "
                        f"the store's index has {dimension}",
                        hint="import with the embedder the export was made with, or re-embed",
                    )
                conn.execute(
                    f"INSERT INTO {VEC_TABLE}(item_id, scope, kind, embedding) VALUES (?,?,?,?)",
                    (item_id, record["scope"], record["kind"], blob),
                )
            if record.get("simhash") is not None:
                conn.executemany(
                    "INSERT OR IGNORE INTO item_simhash_band (scope, band, value, item_id) "
                    "VALUES (?,?,?,?)",
                    [
                        (record["scope"], b, v, item_id)
                        for b, v in simhash_bands(int(record["simhash"]))
                    ],
                )
        elif kind == "supersede":
            _need(record, "uid", "superseded_by")
            source, target = refs.item(record["uid"]), refs.item(record["superseded_by"])
            if source is not None and target is not None:
                wrote(kind, conn.execute(
                    "UPDATE item SET superseded_by = ? WHERE item_id = ? AND superseded_by IS NULL",
                    (target, source),
                ))  # fmt: skip
        elif kind == "relation":
            _need(record, "scope", "src", "rel_type", "dst", "created_at")
            ends = []
            for end in (record["src"], record["dst"]):
                ident = (
                    refs.item(end[1]) if end[0] == "item"
                    else refs.entity(record["scope"], end[1], end[2])
                )  # fmt: skip
                ends.append((end[0], ident))
            if any(ident is None for _, ident in ends):
                counts["relation_skipped"] = counts.get("relation_skipped", 0) + 1
                continue
            wrote(kind, conn.execute(
                "INSERT OR IGNORE INTO relation (scope, src_kind, src_id, rel_type, dst_kind, dst_id, "
                "created_at, metadata) VALUES (?,?,?,?,?,?,?,?)",
                (record["scope"], ends[0][0], ends[0][1], record["rel_type"], ends[1][0],
                 ends[1][1], record["created_at"], _dumps(record.get("metadata"))),
            ))  # fmt: skip
        elif kind == "observation":
            _need(record, "scope", "entity", "text", "created_at")
            entity = refs.entity(record["scope"], *record["entity"])
            exists = (
                entity is not None
                and conn.execute(
                    "SELECT 1 FROM observation WHERE entity_id = ? AND text = ?",
                    (entity, record["text"]),
                ).fetchone()
            )
            if entity is not None and not exists:
                wrote(kind, conn.execute(
                    "INSERT INTO observation (scope, entity_id, text, created_at) VALUES (?,?,?,?)",
                    (record["scope"], entity, record["text"], record["created_at"]),
                ))  # fmt: skip
        elif kind in ("tombstone", "event", "run"):
            table_rows = {
                "tombstone": (
                    "tombstone",
                    ("scope", "kind", "uid", "deleted_at", "expires_at", "payload"),
                ),
                "event": ("event", ("scope", "kind", "subject", "payload", "created_at")),
                "run": ("run", ("scope", "kind", "started_at", "took_ms", "payload")),
            }
            table, columns = table_rows[kind]
            _need(
                record,
                *[c for c in columns if c not in ("expires_at", "subject", "took_ms", "payload")],
            )
            values = [_dumps(record.get(c)) if c == "payload" else record.get(c) for c in columns]
            where = " AND ".join(f"{c} IS ?" for c in columns)
            if conn.execute(f"SELECT 1 FROM {table} WHERE {where}", values).fetchone() is None:
                wrote(kind, conn.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({','.join('?' * len(columns))})",
                    values,
                ))  # fmt: skip
        elif kind == "meta":
            _need(record, "key", "value")
            if not str(record["key"]).startswith(VOLATILE_META):
                wrote(kind, conn.execute(
                    "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
                    (record["key"], record["value"]),
                ))  # fmt: skip
        else:
            raise InvalidInputError(
                f"unknown backup record type {kind!r}",
                hint="import a file written by `memoir export`",
            )
    if scopes:
        bump_vector_generation(conn, scopes)
        conn.executemany(
            "INSERT INTO meta(key, value) VALUES (?, '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            [(f"graph_version:{s}",) for s in sorted(scopes)]
            + [(f"rules_graph_version:{s}",) for s in sorted(scopes)],
        )
    return counts


def decode_embedding(record: Record) -> bytes | None:
    """The float32 bytes of a record's base64 ``embedding`` (None when absent)."""
    encoded = record.get("embedding")
    if not isinstance(encoded, str):
        return None
    return np.frombuffer(base64.b64decode(encoded), dtype="<f4").astype(np.float32).tobytes()
