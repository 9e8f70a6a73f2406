"""SQL of the rules knowledge graph: documents, directives, entities and edges.

Sync functions over a DB-API connection, run through ``SqliteDatabase.read`` / ``write``. A
whole document upsert is one call of :func:`upsert_document`, hence one transaction: resource,
directive items (with their FTS and vector rows), entities and relations change together.
Edges are diffed, not rewritten, so re-ingesting an unchanged document writes nothing.

Every change bumps a per-scope graph version in ``meta``; readers cache their in-memory
directive index and dictionaries against it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from memory_core.models import utc_now
from memory_core.rules.graph import DIRECTIVE_KIND, RULE_DOCUMENT_KIND, DocumentPlan, condition_key
from memory_core.storage.sqlite import items as item_sql

__all__ = [
    "DirectiveRow",
    "DocumentWrite",
    "RuleRow",
    "RunRow",
    "delete_rule_sources",
    "directive_lexical_hits",
    "directive_lexical_search",
    "document_state",
    "fetch_vectors",
    "graph_version",
    "learned_terms",
    "list_query_runs",
    "load_directive_rows",
    "load_directive_vectors",
    "load_rules",
    "match_row_counts",
    "record_query_run",
    "rule_directive_rows",
    "upsert_document",
    "upsert_documents",
]

Edge = tuple[str, int, str, str, int]  # (src_kind, src_id, rel_type, dst_kind, dst_id)

QUERY_RUN_KIND = "rules_query"

_RULE_EDGE_TYPES = ("authoritative_for", "layer", "topic", "related", "technology", "when_to_apply")


def _version_key(scope: str) -> str:
    return f"rules_graph_version:{scope}"


def graph_version(conn: Any, scope: str) -> int:
    """The scope's graph version (0 before any rules were written)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_version_key(scope),)).fetchone()
    return int(row[0]) if row else 0


def _bump_version(conn: Any, scope: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
        (_version_key(scope),),
    )


@dataclass(frozen=True)
class DocumentWrite:
    """What one document upsert changed."""

    status: str  # created | updated | unchanged
    rules_upserted: int = 0
    sections_created: int = 0
    directives_added: int = 0
    directives_removed: int = 0
    directives_unchanged: int = 0
    relations_established: int = 0
    directives_total: int = 0


def document_state(conn: Any, scope: str, uri: str) -> tuple[str | None, set[str]]:
    """The stored content hash of the document at ``uri`` and its directive uids."""
    row = conn.execute(
        "SELECT resource_id, content_hash FROM resource WHERE scope = ? AND kind = ? AND uri = ?",
        (scope, RULE_DOCUMENT_KIND, uri),
    ).fetchone()
    if row is None:
        return None, set()
    uids = {
        r[0]
        for r in conn.execute(
            "SELECT uid FROM item WHERE resource_id = ? AND kind = ?", (row[0], DIRECTIVE_KIND)
        )
    }
    return str(row[1]), uids


class _Entities:
    """Get-or-create of entity rows within one transaction."""

    def __init__(self, conn: Any, scope: str, now: str) -> None:
        self.conn = conn
        self.scope = scope
        self.now = now
        self.cache: dict[tuple[str, str], int] = {}
        self.created: dict[str, int] = {}

    def get(
        self,
        kind: str,
        norm: str,
        name: str,
        *,
        resource_id: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int:
        key = (kind, norm)
        if key in self.cache:
            return self.cache[key]
        row = self.conn.execute(
            "SELECT entity_id FROM entity WHERE scope = ? AND kind = ? AND norm_name = ?",
            (self.scope, kind, norm),
        ).fetchone()
        if row is None:
            cursor = self.conn.execute(
                "INSERT INTO entity (scope, kind, name, norm_name, resource_id, created_at, "
                "metadata) VALUES (?,?,?,?,?,?,?)",
                (
                    self.scope,
                    kind,
                    name[:500],
                    norm,
                    resource_id,
                    self.now,
                    json.dumps(metadata or {}, ensure_ascii=False, sort_keys=True),
                ),
            )
            entity_id = int(cursor.lastrowid)
            self.created[kind] = self.created.get(kind, 0) + 1
        else:
            entity_id = int(row[0])
        self.cache[key] = entity_id
        return entity_id


def _merged_rule_metadata(conn: Any, scope: str, rule_id: str) -> tuple[dict[str, Any], list[int]]:
    """The rule's metadata merged over every source document (merge semantics, Req 7.3)."""
    rows = conn.execute(
        "SELECT resource_id, uri, metadata FROM resource WHERE scope = ? AND kind = ? "
        "AND json_extract(metadata, '$.rule_id') = ? ORDER BY resource_id",
        (scope, RULE_DOCUMENT_KIND, rule_id),
    ).fetchall()
    merged: dict[str, Any] = {
        "sources": [],
        "topics": [],
        "authoritative_for": [],
        "when_to_apply": [],
        "related_rules": [],
    }
    for _, uri, raw in rows:
        meta = json.loads(raw)
        merged["sources"].append(uri)
        for key in ("topics", "authoritative_for", "when_to_apply", "related_rules"):
            for value in meta.get(key) or []:
                if value not in merged[key]:
                    merged[key].append(value)
        for key in ("rule_name", "title", "format", "layer", "description", "default_severity"):
            # The most recently written source (last row) wins for single values.
            if meta.get(key) is not None:
                merged[key] = meta[key]
    return merged, [int(r[0]) for r in rows]


def _delete_resource(conn: Any, scope: str, resource_id: int, orphans: set[int]) -> int:
    item_ids = [
        int(r[0])
        for r in conn.execute("SELECT item_id FROM item WHERE resource_id = ?", (resource_id,))
    ]
    orphans |= _edge_entities(conn, scope, item_ids)
    _delete_edges_of_items(conn, item_ids)
    item_sql.delete_items(conn, item_ids)
    sections = [
        int(r[0])
        for r in conn.execute(
            "SELECT entity_id FROM entity WHERE resource_id = ? AND kind = 'section'",
            (resource_id,),
        )
    ]
    _delete_entities(conn, sections)
    # The rule entity may still name this document as its latest source.
    conn.execute("UPDATE entity SET resource_id = NULL WHERE resource_id = ?", (resource_id,))
    conn.execute("DELETE FROM resource WHERE resource_id = ?", (resource_id,))
    return len(item_ids)


def _delete_edges_of_items(conn: Any, item_ids: Sequence[int]) -> None:
    rows = [(i, i) for i in item_ids]
    conn.executemany(
        "DELETE FROM relation WHERE (src_kind = 'item' AND src_id = ?) "
        "OR (dst_kind = 'item' AND dst_id = ?)",
        rows,
    )


def _delete_entities(conn: Any, entity_ids: Sequence[int]) -> None:
    rows = [(i, i) for i in entity_ids]
    conn.executemany(
        "DELETE FROM relation WHERE (src_kind = 'entity' AND src_id = ?) "
        "OR (dst_kind = 'entity' AND dst_id = ?)",
        rows,
    )
    conn.executemany("DELETE FROM entity WHERE entity_id = ?", [(i,) for i in entity_ids])


def _delete_orphans(conn: Any, scope: str, candidates: Iterable[int] = ()) -> None:
    """Delete entities that lost their last edge (only ``candidates`` are checked).

    Patterns, conditions, topics and technologies live only through their edges; a rule lives
    while a document defines it or another rule names it as Related.
    """
    ids = sorted(set(candidates))
    for start in range(0, len(ids), 400):
        batch = ids[start : start + 400]
        marks = ",".join("?" * len(batch))
        conn.execute(
            f"DELETE FROM entity WHERE entity_id IN ({marks}) AND kind IN ('pattern', "
            "'condition', 'topic', 'technology') AND NOT EXISTS (SELECT 1 FROM relation r "
            "WHERE r.scope = entity.scope AND r.dst_kind = 'entity' AND r.dst_id = "
            "entity.entity_id) AND NOT EXISTS (SELECT 1 FROM relation r WHERE r.scope = "
            "entity.scope AND r.src_kind = 'entity' AND r.src_id = entity.entity_id)",
            batch,
        )
        conn.execute(
            f"DELETE FROM entity WHERE entity_id IN ({marks}) AND kind = 'rule' AND NOT EXISTS "
            "(SELECT 1 FROM resource WHERE resource.scope = entity.scope AND resource.kind = ? "
            "AND json_extract(resource.metadata, '$.rule_id') = entity.norm_name) AND NOT EXISTS "
            "(SELECT 1 FROM relation r WHERE r.scope = entity.scope AND r.dst_kind = 'entity' "
            "AND r.dst_id = entity.entity_id)",
            (*batch, RULE_DOCUMENT_KIND),
        )


def _edge_entities(conn: Any, scope: str, item_ids: Sequence[int]) -> set[int]:
    """Entities at the far end of the given items' edges (orphan candidates after a delete)."""
    found: set[int] = set()
    for start in range(0, len(item_ids), 400):
        batch = list(item_ids[start : start + 400])
        marks = ",".join("?" * len(batch))
        found.update(
            int(r[0])
            for r in conn.execute(
                f"SELECT dst_id FROM relation WHERE scope = ? AND src_kind = 'item' AND "
                f"src_id IN ({marks}) AND dst_kind = 'entity'",
                (scope, *batch),
            )
        )
    return found


def _existing_edges(
    conn: Any,
    scope: str,
    item_ids: Iterable[int],
    entity_ids: Iterable[int],
    rule_entity: int,
) -> set[Edge]:
    found: set[Edge] = set()
    select = (
        "SELECT src_kind, src_id, rel_type, dst_kind, dst_id FROM relation WHERE scope = ? AND "
    )
    items = list(item_ids)
    entities = list(entity_ids)
    for start in range(0, len(items), 400):
        batch = items[start : start + 400]
        marks = ",".join("?" * len(batch))
        for clause in (
            f"src_kind = 'item' AND src_id IN ({marks})",
            f"dst_kind = 'item' AND dst_id IN ({marks})",
        ):
            found.update(tuple(r) for r in conn.execute(select + clause, (scope, *batch)))
    for start in range(0, len(entities), 400):
        batch = entities[start : start + 400]
        marks = ",".join("?" * len(batch))
        found.update(
            tuple(r)
            for r in conn.execute(
                select + f"src_kind = 'entity' AND src_id IN ({marks}) AND dst_kind = 'item'",
                (scope, *batch),
            )
        )
    marks = ",".join("?" * len(_RULE_EDGE_TYPES))
    found.update(
        tuple(r)
        for r in conn.execute(
            select + f"src_kind = 'entity' AND src_id = ? AND rel_type IN ({marks}, 'has_section')",
            (scope, rule_entity, *_RULE_EDGE_TYPES),
        )
    )
    return found


def upsert_documents(
    conn: Any,
    plans: Sequence[DocumentPlan],
    vectors: dict[str, np.ndarray],
    overwrite: bool,
) -> list[DocumentWrite]:
    """Write several document plans in one transaction (ingest of a folder in batches).

    Each document's writes are the same as :func:`upsert_document`; sharing the transaction
    and the entity lookups makes bulk ingest several times faster than one commit per file.
    """
    cache: dict[tuple[str, str], int] = {}
    return [upsert_document(conn, plan, vectors, overwrite, entity_cache=cache) for plan in plans]


def upsert_document(
    conn: Any,
    plan: DocumentPlan,
    vectors: dict[str, np.ndarray],
    overwrite: bool,
    *,
    entity_cache: dict[tuple[str, str], int] | None = None,
) -> DocumentWrite:
    """Write one document's plan (call inside one write transaction).

    Unchanged content (same hash at the same path) writes nothing. Otherwise the document's
    directive set becomes exactly the plan's (removed directives disappear, unchanged ones
    keep their ids and vectors). ``overwrite`` first deletes every other document that
    defines the same rule (Req 7.2); without it the rule's metadata is merged over all its
    documents (Req 7.3).

    Args:
        conn: the connection (inside ``BEGIN IMMEDIATE``).
        plan: the document plan.
        vectors: uid -> embedding for directives that may be new.
        overwrite: replace the rule's other sources instead of merging with them.

    Returns:
        What changed.
    """
    scope, now = plan.scope, utc_now()
    row = conn.execute(
        "SELECT resource_id, content_hash, metadata FROM resource "
        "WHERE scope = ? AND kind = ? AND uri = ?",
        (scope, RULE_DOCUMENT_KIND, plan.uri),
    ).fetchone()
    others = [
        int(r[0])
        for r in conn.execute(
            "SELECT resource_id FROM resource WHERE scope = ? AND kind = ? AND uri != ? "
            "AND json_extract(metadata, '$.rule_id') = ?",
            (scope, RULE_DOCUMENT_KIND, plan.uri, plan.rule_id),
        )
    ]
    if row is not None and row[1] == plan.content_hash and not (overwrite and others):
        return DocumentWrite(
            status="unchanged",
            directives_unchanged=len(plan.directives),
            directives_total=len(plan.directives),
        )
    removed = 0
    orphans: set[int] = set()
    if overwrite:
        for resource_id in others:
            removed += _delete_resource(conn, scope, resource_id, orphans)
    metadata = json.dumps(plan.resource_metadata, ensure_ascii=False, sort_keys=True)
    if row is None:
        cursor = conn.execute(
            "INSERT INTO resource (uid, scope, kind, uri, content_hash, source, created_at, "
            "updated_at, metadata) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                f"rule_document:{scope}:{plan.uri}",
                scope,
                RULE_DOCUMENT_KIND,
                plan.uri,
                plan.content_hash,
                "rules",
                now,
                now,
                metadata,
            ),
        )
        resource_id = int(cursor.lastrowid)
        status = "created"
    else:
        resource_id = int(row[0])
        old_rule = json.loads(row[2]).get("rule_id")
        conn.execute(
            "UPDATE resource SET content_hash = ?, metadata = ?, updated_at = ?, deleted = 0 "
            "WHERE resource_id = ?",
            (plan.content_hash, metadata, now, resource_id),
        )
        status = "updated"
        if old_rule and old_rule != plan.rule_id:
            # The document was renamed to another rule: its old rule loses this source.
            conn.execute(
                "DELETE FROM relation WHERE scope = ? AND src_kind = 'entity' AND src_id IN "
                "(SELECT entity_id FROM entity WHERE scope = ? AND kind = 'rule' AND norm_name = ?)",
                (scope, scope, old_rule),
            )

    # Directives: diff by uid.
    existing = {
        str(r[0]): int(r[1])
        for r in conn.execute(
            "SELECT uid, item_id FROM item WHERE resource_id = ? AND kind = ?",
            (resource_id, DIRECTIVE_KIND),
        )
    }
    wanted = {d.item.uid: d for d in plan.directives}
    gone = [item_id for uid, item_id in existing.items() if uid not in wanted]
    orphans |= _edge_entities(conn, scope, gone)
    _delete_edges_of_items(conn, gone)
    item_sql.delete_items(conn, gone)
    removed += len(gone)
    fresh = [d for uid, d in wanted.items() if uid not in existing]
    with_vec = [d for d in fresh if d.item.uid in vectors]
    without_vec = [d for d in fresh if d.item.uid not in vectors]
    item_ids: dict[str, int] = {uid: existing[uid] for uid in wanted if uid in existing}
    if with_vec:
        ids = item_sql.insert_items(
            conn,
            [replace(d.item, resource_id=resource_id) for d in with_vec],
            np.vstack([vectors[d.item.uid] for d in with_vec]),
        )
        item_ids.update({d.item.uid: i for d, i in zip(with_vec, ids, strict=True)})
    if without_vec:
        ids = item_sql.insert_items(
            conn, [replace(d.item, resource_id=resource_id) for d in without_vec]
        )
        item_ids.update({d.item.uid: i for d, i in zip(without_vec, ids, strict=True)})

    entities = _Entities(conn, scope, now)
    if entity_cache is not None:
        entities.cache = entity_cache  # same transaction: ids stay valid across documents
    merged, _ = _merged_rule_metadata(conn, scope, plan.rule_id)
    rule_entity = entities.get(
        "rule", plan.rule_id, merged.get("rule_name") or plan.rule_name, resource_id=resource_id
    )
    conn.execute(
        "UPDATE entity SET name = ?, metadata = ?, resource_id = ? WHERE entity_id = ?",
        (
            (merged.get("rule_name") or plan.rule_name)[:500],
            json.dumps(merged, ensure_ascii=False, sort_keys=True),
            resource_id,
            rule_entity,
        ),
    )

    # Sections of this document: stable keys, stale ones removed.
    section_ids: dict[str, int] = {}
    for key, display, line in plan.sections:
        section_ids[key] = entities.get(
            "section", key, display, resource_id=resource_id, metadata={"line": line}
        )
    stale_sections = [
        int(r[0])
        for r in conn.execute(
            "SELECT entity_id, norm_name FROM entity WHERE resource_id = ? AND kind = 'section'",
            (resource_id,),
        )
        if r[1] not in section_ids
    ]
    _delete_entities(conn, stale_sections)

    desired: set[Edge] = set()

    def edge(src_kind: str, src: int, rel: str, dst_kind: str, dst: int) -> None:
        desired.add((src_kind, src, rel, dst_kind, dst))

    for topic in merged["authoritative_for"]:
        edge(
            "entity",
            rule_entity,
            "authoritative_for",
            "entity",
            entities.get("topic", topic, topic),
        )
    for topic in merged["topics"]:
        edge("entity", rule_entity, "topic", "entity", entities.get("topic", topic, topic))
    if merged.get("layer"):
        layer = str(merged["layer"])
        edge("entity", rule_entity, "layer", "entity", entities.get("layer", layer, layer))
    for related in merged["related_rules"]:
        if related != plan.rule_id:
            edge("entity", rule_entity, "related", "entity", entities.get("rule", related, related))
    for condition in merged["when_to_apply"]:
        key = condition_key(condition)
        edge(
            "entity",
            rule_entity,
            "when_to_apply",
            "entity",
            entities.get("condition", key, condition),
        )
    for tech, category in plan.technologies.items():
        edge(
            "entity",
            rule_entity,
            "technology",
            "entity",
            entities.get("technology", tech, tech, metadata={"category": category}),
        )
    for section_id in section_ids.values():
        edge("entity", rule_entity, "has_section", "entity", section_id)
    for d in plan.directives:
        item_id = item_ids[d.item.uid]
        edge("entity", rule_entity, "has_directive", "item", item_id)
        if d.section_key in section_ids:
            edge("entity", section_ids[d.section_key], "contains", "item", item_id)
        edge(
            "item", item_id, "severity", "entity", entities.get("severity", d.severity, d.severity)
        )
        if d.layer:
            edge("item", item_id, "layer", "entity", entities.get("layer", d.layer, d.layer))
        for topic in d.topics:
            edge("item", item_id, "topic", "entity", entities.get("topic", topic, topic))
        for condition in d.when_to_apply:
            key = condition_key(condition)
            edge(
                "item",
                item_id,
                "when_to_apply",
                "entity",
                entities.get("condition", key, condition),
            )
        for pattern_key, name in d.patterns:
            edge(
                "item", item_id, "has_pattern", "entity", entities.get("pattern", pattern_key, name)
            )

    current = _existing_edges(conn, scope, item_ids.values(), section_ids.values(), rule_entity)
    # Edges of this rule that other sources own (their directives and sections) are not ours.
    current = {
        e
        for e in current
        if not (
            e[0] == "entity"
            and e[1] == rule_entity
            and e[2] in ("has_directive", "has_section")
            and (
                (e[3] == "item" and e[4] not in item_ids.values())
                or (e[3] == "entity" and e[4] not in section_ids.values())
            )
        )
    }
    stale = current - desired
    conn.executemany(
        "DELETE FROM relation WHERE scope = ? AND src_kind = ? AND src_id = ? AND rel_type = ? "
        "AND dst_kind = ? AND dst_id = ?",
        [(scope, *e) for e in stale],
    )
    new_edges = desired - current
    conn.executemany(
        "INSERT OR IGNORE INTO relation (scope, src_kind, src_id, rel_type, dst_kind, dst_id, "
        "created_at) VALUES (?,?,?,?,?,?,?)",
        [(scope, *e, now) for e in sorted(new_edges)],
    )
    orphans |= {e[4] for e in stale if e[3] == "entity"}
    _delete_orphans(conn, scope, orphans)
    # Entities that may be gone must not be handed out again from the shared cache.
    gone_ids = orphans | set(stale_sections)
    for cache_key in [k for k, v in entities.cache.items() if v in gone_ids]:
        del entities.cache[cache_key]
    _bump_version(conn, scope)
    return DocumentWrite(
        status=status,
        rules_upserted=1,
        sections_created=entities.created.get("section", 0),
        directives_added=len(fresh),
        directives_removed=removed,
        directives_unchanged=len(plan.directives) - len(fresh),
        relations_established=len(new_edges),
        directives_total=len(plan.directives),
    )


def delete_rule_sources(
    conn: Any, scope: str, rule_id: str | None, uri: str | None
) -> tuple[list[str], int, int]:
    """Delete the documents of a rule (by id) or one document (by path).

    Returns:
        (rule ids affected, documents removed, directives removed).
    """
    if uri is not None:
        rows = conn.execute(
            "SELECT resource_id, json_extract(metadata, '$.rule_id') FROM resource "
            "WHERE scope = ? AND kind = ? AND uri = ?",
            (scope, RULE_DOCUMENT_KIND, uri),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT resource_id, json_extract(metadata, '$.rule_id') FROM resource "
            "WHERE scope = ? AND kind = ? AND json_extract(metadata, '$.rule_id') = ?",
            (scope, RULE_DOCUMENT_KIND, rule_id),
        ).fetchall()
    directives = 0
    rules: list[str] = []
    orphans: set[int] = set()
    for resource_id, rid in rows:
        directives += _delete_resource(conn, scope, int(resource_id), orphans)
        if rid not in rules:
            rules.append(str(rid))
    if not rows:
        return [], 0, 0
    entities = _Entities(conn, scope, utc_now())
    for rid in rules:
        merged, sources = _merged_rule_metadata(conn, scope, rid)
        entity_id = entities.get("rule", rid, rid)
        if sources:
            conn.execute(
                "UPDATE entity SET metadata = ? WHERE entity_id = ?",
                (json.dumps(merged, ensure_ascii=False, sort_keys=True), entity_id),
            )
        else:
            marks = ",".join("?" * len(_RULE_EDGE_TYPES))
            orphans.add(entity_id)
            orphans.update(
                int(r[0])
                for r in conn.execute(
                    "SELECT dst_id FROM relation WHERE scope = ? AND src_kind = 'entity' AND "
                    "src_id = ? AND dst_kind = 'entity'",
                    (scope, entity_id),
                )
            )
            conn.execute(
                f"DELETE FROM relation WHERE scope = ? AND src_kind = 'entity' AND src_id = ? "
                f"AND rel_type IN ({marks}, 'has_section', 'has_directive')",
                (scope, entity_id, *_RULE_EDGE_TYPES),
            )
    _delete_orphans(conn, scope, orphans)
    _bump_version(conn, scope)
    return rules, len(rows), directives


@dataclass(frozen=True, slots=True)
class DirectiveRow:
    """A directive as the ranker needs it."""

    item_id: int
    uid: str
    token_count: int
    start_line: int | None
    end_line: int | None
    uri: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RuleRow:
    """A rule entity with its merged metadata."""

    rule_id: str
    name: str
    metadata: dict[str, Any]


_INDEX_FIELDS = (
    "rule_id",
    "statement",
    "severity",
    "polarity",
    "layer",
    "topics",
    "when_to_apply",
    "section_path",
)
_LIST_FIELDS = frozenset({"topics", "when_to_apply", "section_path"})


def load_directive_rows(conn: Any, scope: str) -> list[DirectiveRow]:
    """Every live directive of ``scope`` with the metadata the ranker reads (for the index).

    Only those fields are extracted (in SQL): examples, details and rationales stay in the
    database, which keeps loading 100k directives to seconds.
    """
    fields = ", ".join(f"json_extract(item.metadata, '$.{f}')" for f in _INDEX_FIELDS)
    rows: list[DirectiveRow] = []
    for r in conn.execute(
        "SELECT item.item_id, item.uid, item.token_count, item.start_line, item.end_line, "
        f"resource.uri, {fields} FROM item LEFT JOIN resource "
        "ON resource.resource_id = item.resource_id "
        "WHERE item.scope = ? AND item.kind = ? AND item.deleted = 0 ORDER BY item.item_id",
        (scope, DIRECTIVE_KIND),
    ):
        metadata = {
            name: (json.loads(value) if name in _LIST_FIELDS and value else value)
            for name, value in zip(_INDEX_FIELDS, r[6:], strict=True)
        }
        rows.append(
            DirectiveRow(int(r[0]), str(r[1]), int(r[2]), r[3], r[4], str(r[5] or ""), metadata)
        )
    return rows


def rule_directive_rows(conn: Any, scope: str, rule_id: str) -> list[DirectiveRow]:
    """The directives of one rule, in source order."""
    return [
        DirectiveRow(int(r[0]), str(r[1]), int(r[2]), r[3], r[4], str(r[5] or ""), json.loads(r[6]))
        for r in conn.execute(
            "SELECT item.item_id, item.uid, item.token_count, item.start_line, item.end_line, "
            "resource.uri, item.metadata FROM item JOIN resource "
            "ON resource.resource_id = item.resource_id "
            "WHERE item.scope = ? AND item.kind = ? AND item.deleted = 0 "
            "AND json_extract(resource.metadata, '$.rule_id') = ? "
            "ORDER BY resource.uri, item.start_line",
            (scope, DIRECTIVE_KIND, rule_id),
        )
    ]


def load_rules(conn: Any, scope: str) -> list[RuleRow]:
    """Rules of ``scope`` that have at least one source document."""
    return [
        RuleRow(str(r[0]), str(r[1]), json.loads(r[2]))
        for r in conn.execute(
            "SELECT norm_name, name, metadata FROM entity WHERE scope = ? AND kind = 'rule' "
            "AND json_array_length(json_extract(metadata, '$.sources')) > 0 ORDER BY norm_name",
            (scope,),
        )
    ]


def learned_terms(conn: Any, scope: str) -> tuple[list[str], dict[str, str]]:
    """Topic names and technologies (name -> category) the graph knows in ``scope``."""
    topics = [
        str(r[0])
        for r in conn.execute(
            "SELECT norm_name FROM entity WHERE scope = ? AND kind = 'topic' ORDER BY norm_name",
            (scope,),
        )
    ]
    techs = {
        str(r[0]): str(json.loads(r[1]).get("category", "framework"))
        for r in conn.execute(
            "SELECT norm_name, metadata FROM entity WHERE scope = ? AND kind = 'technology'",
            (scope,),
        )
    }
    return topics, techs


def fetch_vectors(conn: Any, item_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """Stored embeddings of the given directives (missing ones are absent)."""
    if not item_ids or item_sql.vector_table_dimension(conn) is None:
        return {}
    found: dict[int, np.ndarray] = {}
    ids = list(item_ids)
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        for item_id, blob in conn.execute(
            f"SELECT item_id, embedding FROM {item_sql.VEC_TABLE} WHERE item_id IN ({marks})", batch
        ):
            found[int(item_id)] = np.frombuffer(blob, dtype=np.float32)
    return found


def directive_lexical_search(
    conn: Any, match: str, *, scope: str, limit: int
) -> list[tuple[int, float]]:
    """bm25 hits among the scope's directives, best first: (item id, bm25, negative = better).

    ``CROSS JOIN`` pins the join order: FTS5 first, then the item row by primary key. Left to
    itself the planner scans ``item`` by its (scope, kind) index and runs the MATCH once per
    row, which took over a second at 2,000 directives.
    """
    rows = conn.execute(
        "SELECT item_fts.rowid, bm25(item_fts) AS rank FROM item_fts "
        "CROSS JOIN item ON item.item_id = item_fts.rowid "
        "WHERE item_fts MATCH ? AND item.scope = ? AND item.kind = ? AND item.deleted = 0 "
        "ORDER BY rank, item_fts.rowid LIMIT ?",
        (match, scope, DIRECTIVE_KIND, limit),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


# The fast lexical path ranks FTS rows alone and keeps the scope's directives among the
# best ``limit * _OVERFETCH``; other scopes and kinds share item_fts, hence the margin.
_OVERFETCH = 4


def match_row_counts(conn: Any, matches: Sequence[str]) -> list[int]:
    """How many FTS rows (any scope or kind) each MATCH expression hits.

    Counting walks the term's doclist without ranking or reading rows: well under a
    millisecond for a term in 10,000 rows. The lexical arm uses it to leave out words that
    are absent or too common to be worth a bm25 per row.
    """
    return [
        int(
            conn.execute("SELECT count(*) FROM item_fts WHERE item_fts MATCH ?", (m,)).fetchone()[0]
        )
        for m in matches
    ]


def directive_lexical_hits(
    conn: Any, match: str, *, scope: str, limit: int
) -> list[tuple[int, float]]:
    """Like :func:`directive_lexical_search`, ranking FTS rows before touching ``item``.

    The join of :func:`directive_lexical_search` reads one ``item`` row per match before the
    sort; here FTS5 ranks alone (``ORDER BY rank, rowid`` with a LIMIT), then one lookup keeps
    the scope's live directives. When other scopes or kinds crowd the over-fetched rows the
    exact joined query runs instead, so results are the same either way.
    """
    fetch = max(1, limit) * _OVERFETCH
    rows = conn.execute(
        "SELECT rowid, rank FROM item_fts WHERE item_fts MATCH ? ORDER BY rank, rowid LIMIT ?",
        (match, fetch),
    ).fetchall()
    if not rows:
        return []
    marks = ",".join("?" * len(rows))
    keep = {
        int(r[0])
        for r in conn.execute(
            f"SELECT item_id FROM item WHERE item_id IN ({marks}) AND scope = ? AND kind = ? "
            "AND deleted = 0",
            (*(r[0] for r in rows), scope, DIRECTIVE_KIND),
        )
    }
    hits = [(int(r[0]), float(r[1])) for r in rows if r[0] in keep][:limit]
    if len(hits) < limit and len(rows) == fetch:
        return directive_lexical_search(conn, match, scope=scope, limit=limit)
    return hits


def load_directive_vectors(conn: Any, scope: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Every stored vector of the scope's directives: (item ids, float32 matrix), or None.

    The ranker keeps them in memory: one matrix product scores all directives faster than a
    sqlite-vec scan, and gives every candidate its SemanticSim without another query.
    """
    if item_sql.vector_table_dimension(conn) is None:
        return None
    ids: list[int] = []
    blobs: list[bytes] = []
    for item_id, kind, blob in conn.execute(
        f"SELECT item_id, kind, embedding FROM {item_sql.VEC_TABLE} WHERE scope = ?", (scope,)
    ):
        if kind == DIRECTIVE_KIND:
            ids.append(int(item_id))
            blobs.append(blob)
    if not ids:
        return None
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), -1)
    return np.asarray(ids, dtype=np.int64), matrix


@dataclass(frozen=True, slots=True)
class RunRow:
    """One recorded ``query_directives`` run."""

    run_id: int
    scope: str
    started_at: str
    took_ms: float | None
    payload: dict[str, Any]


# Every query adds a run: keep the newest ones per scope so the table cannot grow forever.
# Pruned every _PRUNE_EVERY inserts, which keeps the per-query cost to one small insert.
QUERY_RUNS_KEPT = 10_000
_PRUNE_EVERY = 100


def record_query_run(
    conn: Any,
    scope: str,
    started_at: str,
    took_ms: float,
    payload: dict[str, Any],
    *,
    keep: int = QUERY_RUNS_KEPT,
) -> int:
    """Record one ``query_directives`` run (DESIGN §6); returns its run id.

    The payload is built by the service from diagnostics only (never document text). The
    scope keeps its newest ``keep`` query runs (older ones are pruned now and then).
    """
    cursor = conn.execute(
        "INSERT INTO run (scope, kind, started_at, took_ms, payload) VALUES (?, ?, ?, ?, ?)",
        (
            scope,
            QUERY_RUN_KIND,
            started_at,
            took_ms,
            json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str),
        ),
    )
    run_id = int(cursor.lastrowid)
    if run_id % _PRUNE_EVERY == 0:
        conn.execute(
            "DELETE FROM run WHERE scope = ? AND kind = ? AND run_id <= ("
            "SELECT run_id FROM run WHERE scope = ? AND kind = ? "
            "ORDER BY run_id DESC LIMIT 1 OFFSET ?)",
            (scope, QUERY_RUN_KIND, scope, QUERY_RUN_KIND, max(1, keep)),
        )
    return run_id


def list_query_runs(conn: Any, scope: str, limit: int) -> list[RunRow]:
    """The newest ``query_directives`` runs of ``scope``, newest first."""
    rows = conn.execute(
        "SELECT run_id, scope, started_at, took_ms, payload FROM run "
        "WHERE scope = ? AND kind = ? ORDER BY run_id DESC LIMIT ?",
        (scope, QUERY_RUN_KIND, max(1, int(limit))),
    ).fetchall()
    return [RunRow(int(r[0]), str(r[1]), str(r[2]), r[3], json.loads(r[4] or "{}")) for r in rows]
