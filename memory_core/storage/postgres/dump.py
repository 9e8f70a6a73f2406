"""Backup records of a PostgreSQL store: the ``memoir-store/1`` format of ``sqlite/dump.py``.

The same records, in the same order, from the same tables (the PostgreSQL schema is the SQLite
schema); only the SQL dialect and the vector and lexical rows differ.

Original notes (SQLite):

The format (``memoir-store/1``, described in :mod:`memory_core.backup`) carries no row ids:
references are natural keys (a resource or item by its ``uid``, an entity by ``(kind, key)``,
a category by its path of names), so a dump restores into any store, of any backend, and a
store restored from a dump dumps to the same bytes. Timestamps are kept as stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from memory_core.errors import InvalidInputError
from memory_core.storage.postgres.database import PgVector
from memory_core.storage.postgres.items import (
    bump_vector_generation,
    lexical_add,
    vector_dimension,
)
from memory_core.storage.sqlite.dump import (
    VOLATILE_META,
    _dumps,
    _need,
    _Refs,
    decode_embedding,
    dump_records,
)
from memory_core.storage.sqlite.items import simhash_bands, to_signed64

__all__ = ["dump_rows", "restore_rows"]

Record = dict[str, Any]


class _Qmark:
    """The statements of ``sqlite/dump.py`` (and those below) use ``?`` markers and
    contain no literal ``%`` or ``?``; this spells them as psycopg's ``%s``."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(sql.replace("?", "%s"), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.raw.cursor().executemany(sql.replace("?", "%s"), rows)


def _page_vectors(conn: Any, ids: list[int]) -> dict[int, bytes]:
    return {
        int(i): np.asarray(v, dtype="<f4").tobytes()
        for i, v in conn.execute(
            "SELECT item_id, embedding FROM item_vec WHERE item_id = ANY(?)", [ids]
        )
    }


def dump_rows(raw: Any, scope_key: str | None) -> Iterator[Record]:
    """Every row of the store (of one scope, or all) as records, in a deterministic order."""
    has_vectors = vector_dimension(raw) is not None
    return dump_records(_Qmark(raw), scope_key, _page_vectors if has_vectors else None)


# -- restore -----------------------------------------------------------------------------------


def restore_rows(
    conn: Any,
    records: Iterable[Record],
    *,
    decode_vector: Callable[[Record], bytes | None] = decode_embedding,
) -> dict[str, int]:
    """Insert ``records`` (one batch, one transaction); rows already present are kept.

    Args:
        decode_vector: the float32 blob to store for an item record (None: no vector).

    Returns:
        Rows written per record type.
    """
    from memory_core.categories import normalise_category_name

    conn = _Qmark(conn)
    refs = _Refs(conn)
    counts: dict[str, int] = {}
    dimension = vector_dimension(conn.raw)
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
                "ON CONFLICT(uid) DO NOTHING RETURNING item_id",
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
            inserted = cursor.fetchone()
            if inserted is None:
                continue
            item_id = int(inserted[0])
            refs.items[record["uid"]] = item_id
            scopes.add(record["scope"])
            lexical_add(conn.raw, [item_id])
            blob = decode_vector(record)
            if blob is not None and dimension is not None:
                if len(blob) != 4 * dimension:
                    raise InvalidInputError(
                        f"item {record['uid']!r} has a vector of {len(blob) // 4} dimensions, "
                        f"the store's index has {dimension}",
                        hint="import with the embedder the export was made with, or re-embed",
                    )
                conn.execute(
                    "INSERT INTO item_vec (item_id, scope, kind, embedding) VALUES (?,?,?,?)",
                    (
                        item_id,
                        record["scope"],
                        record["kind"],
                        PgVector(np.frombuffer(blob, dtype=np.float32)),
                    ),
                )
            if record.get("simhash") is not None:
                conn.executemany(
                    "INSERT INTO item_simhash_band (scope, band, value, item_id) "
                    "VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
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
                "INSERT INTO relation (scope, src_kind, src_id, rel_type, dst_kind, dst_id, "
                "created_at, metadata) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
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
            where = " AND ".join(f"{c} IS NOT DISTINCT FROM ?" for c in columns)
            if conn.execute(f"SELECT 1 FROM {table} WHERE {where}", values).fetchone() is None:
                wrote(kind, conn.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({','.join(['?'] * len(columns))})",
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
        bump_vector_generation(conn.raw, scopes)
        conn.executemany(
            "INSERT INTO meta(key, value) VALUES (?, '1') "
            "ON CONFLICT(key) DO UPDATE SET value = (meta.value::bigint + 1)::text",
            [(f"graph_version:{s}",) for s in sorted(scopes)]
            + [(f"rules_graph_version:{s}",) for s in sorted(scopes)],
        )
    return counts
