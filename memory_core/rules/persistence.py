"""The rules knowledge graph on the storage ports: documents, directives, entities, edges, runs.

Functions of one :class:`~memory_core.storage.ports.Tx`, run inside ``Store.read`` /
``Store.write``, so they work on every backend with the ``resources``, ``items``, ``graph`` and
``log`` ports. A whole document upsert is one transaction: resource, directive items (with
their lexical and vector rows), entities and edges change together. Which edges exist is
decided by :mod:`memory_core.rules.graph_diff` (pure); this module only asks and applies.

Every change bumps the scope's graph version; readers cache their in-memory directive index
and dictionaries against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from memory_core.filters import Compare
from memory_core.models import Edge, Item, NewEntity, NewResource, Resource
from memory_core.rules.graph import DIRECTIVE_KIND, RULE_DOCUMENT_KIND, DocumentPlan
from memory_core.rules.graph_diff import (
    ORPHAN_KINDS,
    RULE_EDGE_TYPES,
    EntityKey,
    desired_edges,
    document_entities,
    merged_rule_metadata,
    owned_edges,
)
from memory_core.scope import Scope
from memory_core.storage.ports import ResourceUpdate, Tx

__all__ = [
    "QUERY_RUNS_KEPT",
    "QUERY_RUN_KIND",
    "DirectiveRow",
    "DocumentWrite",
    "RuleRow",
    "delete_rule_sources",
    "document_state",
    "graph_version",
    "learned_terms",
    "load_directive_rows",
    "load_directive_vectors",
    "load_rules",
    "record_query_run",
    "rule_directive_rows",
    "upsert_documents",
]

QUERY_RUN_KIND = "rules_query"
_PAGE = 2000


def graph_version(tx: Tx, scope: Scope) -> int:
    """The scope's graph version (0 before any graph was written)."""
    return tx.graph.version(scope)


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


def _items_of(
    tx: Tx, scope: Scope, resource_id: int, *, meta_keys: Sequence[str] | None = None
) -> list[Item]:
    """Every live item of one resource, by item id."""
    found: list[Item] = []
    where = Compare("item.resource_id", "=", resource_id)
    while True:
        page = tx.items.find(
            scope,
            where=where,
            after=found[-1] if found else None,
            limit=_PAGE,
            meta_keys=meta_keys,
        )
        found += page
        if len(page) < _PAGE:
            return found


def _document(tx: Tx, scope: Scope, uri: str) -> Resource | None:
    rows = tx.resources.find(scope, kinds=(RULE_DOCUMENT_KIND,), uri=uri, include_deleted=True)
    return rows[0] if rows else None


def _rule_sources(tx: Tx, scope: Scope, rule_id: str) -> list[Resource]:
    return tx.resources.find(
        scope, kinds=(RULE_DOCUMENT_KIND,), meta={"rule_id": rule_id}, include_deleted=True
    )


def _is_current(stored: Resource | None, plan: DocumentPlan) -> bool:
    """The stored document is this plan's text, parsed by this plan's parser version and
    indexed by this plan's index version."""
    return (
        stored is not None
        and stored.content_hash == plan.content_hash
        and all(
            stored.metadata.get(key) == plan.resource_metadata[key]
            for key in ("parser_version", "index_version")
        )
    )


def document_state(tx: Tx, plan: DocumentPlan) -> tuple[bool, set[str]]:
    """Whether the stored document at the plan's path is current, and its directive uids."""
    resource = _document(tx, plan.scope, plan.uri)
    if resource is None:
        return False, set()
    items = _items_of(tx, plan.scope, resource.resource_id, meta_keys=())
    return _is_current(resource, plan), {i.uid for i in items if i.kind == DIRECTIVE_KIND}


def _far_entities(tx: Tx, scope: Scope, item_ids: Sequence[int]) -> set[int]:
    """Entities at the far end of the given items' edges (orphan candidates after a delete)."""
    if not item_ids:
        return set()
    edges = tx.graph.edges(scope, sources=[("item", i) for i in item_ids])
    return {e.dst_id for e in edges if e.dst_kind == "entity"}


def _delete_resource(tx: Tx, scope: Scope, resource_id: int, orphans: set[int]) -> int:
    item_ids = [i.item_id for i in _items_of(tx, scope, resource_id, meta_keys=())]
    orphans |= _far_entities(tx, scope, item_ids)
    sections = tx.graph.find_entities(scope, kinds=("section",), resource_id=resource_id)
    tx.graph.delete_entities([e.entity_id for e in sections])
    # Its items go with it; the rule entity may still name it and keeps existing unlinked.
    tx.resources.delete([resource_id])
    return len(item_ids)


def _delete_orphans(tx: Tx, scope: Scope, candidates: Iterable[int]) -> None:
    """Delete entities that lost their last edge (only ``candidates`` are checked).

    Patterns, conditions, topics and technologies live only through their edges; a rule lives
    while a document defines it or another rule names it as Related.
    """
    lonely = tx.graph.orphans(scope, candidates)
    gone: list[int] = []
    for entity in tx.graph.get_entities(lonely).values():
        if entity.kind in ORPHAN_KINDS or (
            entity.kind == "rule" and not _rule_sources(tx, scope, entity.key)
        ):
            gone.append(entity.entity_id)
    tx.graph.delete_entities(sorted(gone))


def _current_edges(
    tx: Tx, scope: Scope, item_ids: Sequence[int], section_ids: Sequence[int], rule: int
) -> set[Edge]:
    items = [("item", i) for i in item_ids]
    found = {
        e
        for e in tx.graph.edges(
            scope, sources=[*items, *(("entity", s) for s in section_ids)], targets=items
        )
        if e.src_kind == "item" or e.dst_kind == "item"
    }
    found |= tx.graph.edges(
        scope, sources=[("entity", rule)], rel_types=(*RULE_EDGE_TYPES, "has_section")
    )
    return found


def upsert_documents(
    tx: Tx, plans: Sequence[DocumentPlan], vectors: dict[str, np.ndarray], overwrite: bool
) -> list[DocumentWrite]:
    """Write several document plans in one transaction (ingest of a folder in batches).

    The documents share their entity lookups: topics, layers, severities and conditions
    recur across documents, and an id found once stays valid in the same transaction.
    """
    known: dict[EntityKey, int] = {}
    return [upsert_document(tx, plan, vectors, overwrite, known=known) for plan in plans]


def _ensure_entities(
    tx: Tx, scope: Scope, needed: Sequence[NewEntity], known: dict[EntityKey, int]
) -> dict[EntityKey, int]:
    """``tx.graph.ensure_entities`` asked only for entities ``known`` does not hold yet."""
    missing = [e for e in needed if (e.kind, e.key) not in known]
    if missing:
        known.update(tx.graph.ensure_entities(scope, missing))
    return {(e.kind, e.key): known[(e.kind, e.key)] for e in needed}


def _forget(known: dict[EntityKey, int], entity_ids: Iterable[int]) -> None:
    """Drop cached entity ids that may have been deleted."""
    gone = set(entity_ids)
    if not gone:
        return
    for key in [k for k, v in known.items() if v in gone]:
        del known[key]


def upsert_document(
    tx: Tx,
    plan: DocumentPlan,
    vectors: dict[str, np.ndarray],
    overwrite: bool,
    *,
    known: dict[EntityKey, int] | None = None,
) -> DocumentWrite:
    """Write one document's plan (inside one write transaction).

    Unchanged content (same hash at the same path, same parser version) writes nothing. Otherwise the document's
    directive set becomes exactly the plan's (removed directives disappear, unchanged ones
    keep their ids and vectors). ``overwrite`` first deletes every other document that
    defines the same rule (Req 7.2); without it the rule's metadata is merged over all its
    documents (Req 7.3).

    Args:
        tx: the write transaction.
        plan: the document plan.
        vectors: uid -> embedding for directives that may be new.
        overwrite: replace the rule's other sources instead of merging with them.
        known: entity ids already found in this transaction (read and extended).

    Returns:
        What changed.
    """
    scope = plan.scope
    stored = _document(tx, scope, plan.uri)
    others = [r.resource_id for r in _rule_sources(tx, scope, plan.rule_id) if r.uri != plan.uri]
    if _is_current(stored, plan) and not (overwrite and others):
        return DocumentWrite(
            status="unchanged",
            directives_unchanged=len(plan.directives),
            directives_total=len(plan.directives),
        )
    removed = 0
    orphans: set[int] = set()
    known = {} if known is None else known
    if overwrite and others:
        known.clear()  # their sections go
        for other in others:
            removed += _delete_resource(tx, scope, other, orphans)
    if stored is None:
        resource_id = tx.resources.add(
            NewResource(
                uid=f"rule_document:{scope.key}:{plan.uri}",
                scope=scope,
                kind=RULE_DOCUMENT_KIND,
                uri=plan.uri,
                content_hash=plan.content_hash,
                source="rules",
                metadata=plan.resource_metadata,
            )
        )
        status = "created"
    else:
        resource_id = stored.resource_id
        tx.resources.update(
            resource_id,
            ResourceUpdate(
                content_hash=plan.content_hash, metadata=plan.resource_metadata, deleted=False
            ),
        )
        status = "updated"
        old_rule = stored.metadata.get("rule_id")
        if old_rule and old_rule != plan.rule_id:
            # The document was renamed to another rule: its old rule loses this source.
            old = tx.graph.find_entities(scope, kinds=("rule",), keys=(str(old_rule),))
            if old:
                edges = tx.graph.edges(scope, sources=[("entity", e.entity_id) for e in old])
                tx.graph.apply_edges(scope, add=(), remove=edges)

    # Directives: diff by uid.
    existing = {
        i.uid: i.item_id
        for i in _items_of(tx, scope, resource_id, meta_keys=())
        if i.kind == DIRECTIVE_KIND
    }
    wanted = {d.item.uid: d for d in plan.directives}
    gone = [item_id for uid, item_id in existing.items() if uid not in wanted]
    orphans |= _far_entities(tx, scope, gone)
    tx.items.delete(gone)
    removed += len(gone)
    fresh = [d for uid, d in wanted.items() if uid not in existing]
    item_ids: dict[str, int] = {uid: existing[uid] for uid in wanted if uid in existing}
    with_vec = [d for d in fresh if d.item.uid in vectors]
    without_vec = [d for d in fresh if d.item.uid not in vectors]
    for group, matrix in (
        (with_vec, np.vstack([vectors[d.item.uid] for d in with_vec]) if with_vec else None),
        (without_vec, None),
    ):
        if group:
            ids = tx.items.add([replace(d.item, resource_id=resource_id) for d in group], matrix)
            item_ids.update({d.item.uid: i for d, i in zip(group, ids, strict=True)})

    # The rule merged over its sources, then its entities and this document's sections.
    merged = merged_rule_metadata(_rule_sources(tx, scope, plan.rule_id))
    before = {
        e.key: e.entity_id
        for e in tx.graph.find_entities(scope, kinds=("section",), resource_id=resource_id)
    }
    needed = document_entities(plan, merged, resource_id)
    entities = _ensure_entities(tx, scope, needed, known)
    rule = entities[("rule", plan.rule_id)]
    tx.graph.update_entity(rule, name=needed[0].name, metadata=merged, resource_id=resource_id)
    section_keys = {key for key, _, _ in plan.sections}
    stale_sections = [i for key, i in before.items() if key not in section_keys]
    tx.graph.delete_entities(stale_sections)
    section_ids = [entities[("section", key)] for key in section_keys]

    desired = desired_edges(plan, merged, entities=entities, item_ids=item_ids)
    current = owned_edges(
        _current_edges(tx, scope, list(item_ids.values()), section_ids, rule),
        rule=rule,
        item_ids=item_ids.values(),
        section_ids=section_ids,
    )
    stale = current - desired
    new_edges = desired - current
    tx.graph.apply_edges(scope, add=new_edges, remove=stale)
    orphans |= {e.dst_id for e in stale if e.dst_kind == "entity"}
    _delete_orphans(tx, scope, orphans)
    _forget(known, [*orphans, *stale_sections])
    tx.graph.bump_version(scope)
    return DocumentWrite(
        status=status,
        rules_upserted=1,
        sections_created=len(section_keys - set(before)),
        directives_added=len(fresh),
        directives_removed=removed,
        directives_unchanged=len(plan.directives) - len(fresh),
        relations_established=len(new_edges),
        directives_total=len(plan.directives),
    )


def delete_rule_sources(
    tx: Tx, scope: Scope, rule_id: str | None, uri: str | None
) -> tuple[list[str], int, int]:
    """Delete the documents of a rule (by id) or one document (by path).

    Returns:
        (rule ids affected, documents removed, directives removed).
    """
    if uri is not None:
        found = _document(tx, scope, uri)
        resources = [found] if found is not None else []
    else:
        resources = _rule_sources(tx, scope, str(rule_id))
    if not resources:
        return [], 0, 0
    directives = 0
    rules: list[str] = []
    orphans: set[int] = set()
    for resource in resources:
        directives += _delete_resource(tx, scope, resource.resource_id, orphans)
        rid = str(resource.metadata.get("rule_id"))
        if rid not in rules:
            rules.append(rid)
    for rid in rules:
        sources = _rule_sources(tx, scope, rid)
        entity_id = tx.graph.ensure_entities(scope, [NewEntity("rule", rid, rid)])[("rule", rid)]
        if sources:
            tx.graph.update_entity(entity_id, metadata=merged_rule_metadata(sources))
            continue
        # The rule's last source went: so do its own edges, and what only they held.
        owned = tx.graph.edges(
            scope,
            sources=[("entity", entity_id)],
            rel_types=(*RULE_EDGE_TYPES, "has_section", "has_directive"),
        )
        orphans.add(entity_id)
        orphans |= {
            e.dst_id
            for e in tx.graph.edges(scope, sources=[("entity", entity_id)])
            if e.dst_kind == "entity"
        }
        tx.graph.apply_edges(scope, add=(), remove=owned)
    _delete_orphans(tx, scope, orphans)
    tx.graph.bump_version(scope)
    return rules, len(resources), directives


# -- what the ranker reads -------------------------------------------------------------------


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


def _rows(tx: Tx, items: Sequence[Item], fields: Sequence[str] | None) -> list[DirectiveRow]:
    uris = {
        r.resource_id: r.uri
        for r in tx.resources.get(
            sorted({i.resource_id for i in items if i.resource_id is not None})
        ).values()
    }
    return [
        DirectiveRow(
            i.item_id,
            i.uid,
            i.token_count,
            i.start_line,
            i.end_line,
            uris.get(i.resource_id, "") if i.resource_id is not None else "",
            {f: i.metadata.get(f) for f in fields} if fields is not None else i.metadata,
        )
        for i in items
    ]


def load_directive_rows(tx: Tx, scope: Scope) -> list[DirectiveRow]:
    """Every live directive of ``scope`` with the metadata the ranker reads (for the index).

    Only those fields are read: examples, details and rationales stay in the store, which
    keeps loading 100k directives to seconds.
    """
    items: list[Item] = []
    while True:
        page = tx.items.find(
            scope,
            kinds=(DIRECTIVE_KIND,),
            after=items[-1] if items else None,
            limit=_PAGE * 5,
            meta_keys=_INDEX_FIELDS,
        )
        items += page
        if len(page) < _PAGE * 5:
            return _rows(tx, items, _INDEX_FIELDS)


def rule_directive_rows(tx: Tx, scope: Scope, rule_id: str) -> list[DirectiveRow]:
    """The directives of one rule, in source order."""
    items: list[Item] = []
    for resource in _rule_sources(tx, scope, rule_id):
        items += [i for i in _items_of(tx, scope, resource.resource_id) if i.kind == DIRECTIVE_KIND]
    rows = _rows(tx, items, None)
    return sorted(rows, key=lambda r: (r.uri, r.start_line is not None, r.start_line or 0))


def load_rules(tx: Tx, scope: Scope) -> list[RuleRow]:
    """Rules of ``scope`` that have at least one source document, by rule id."""
    return [
        RuleRow(e.key, e.name, e.metadata)
        for e in tx.graph.find_entities(scope, kinds=("rule",))
        if e.metadata.get("sources")
    ]


def learned_terms(tx: Tx, scope: Scope) -> tuple[list[str], dict[str, str]]:
    """Topic names and technologies (name -> category) the graph knows in ``scope``."""
    entities = tx.graph.find_entities(scope, kinds=("topic", "technology"))
    topics = [e.key for e in entities if e.kind == "topic"]
    techs = {
        e.key: str(e.metadata.get("category", "framework"))
        for e in entities
        if e.kind == "technology"
    }
    return topics, techs


def load_directive_vectors(tx: Tx, scope: Scope) -> tuple[np.ndarray, np.ndarray] | None:
    """Every stored vector of the scope's directives: (item ids, float32 matrix), or None.

    The ranker keeps them in memory: one matrix product scores all directives faster than a
    vector-index search, and gives every candidate its SemanticSim without another query.
    """
    ids, matrix = tx.vectors.load(scope, (DIRECTIVE_KIND,))
    if not len(ids):
        return None
    return ids, matrix


# -- query runs ------------------------------------------------------------------------------

# Every query adds a run: keep the newest ones per scope so the log cannot grow forever.
# Pruned every _PRUNE_EVERY inserts, which keeps the per-query cost to one small insert.
QUERY_RUNS_KEPT = 10_000
_PRUNE_EVERY = 100


def record_query_run(
    tx: Tx,
    scope: Scope,
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
    run_id = tx.log.record_run(
        scope, QUERY_RUN_KIND, took_ms=took_ms, payload=payload, started_at=started_at
    )
    if run_id % _PRUNE_EVERY == 0:
        tx.log.prune_runs(scope, QUERY_RUN_KIND, keep=max(1, keep))
    return run_id
