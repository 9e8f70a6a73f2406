"""The rule graph's edges and merged rule metadata, decided here and applied by storage (pure).

A document upsert asks the store for what exists (the rule's source documents, the document's
entities and edges) and hands the answers to these functions: :func:`merged_rule_metadata`
merges a rule over all its documents (Requirement 7.3), :func:`document_entities` names every
entity the document's edges point at, :func:`desired_edges` builds the edge set the graph must
hold, and :func:`owned_edges` keeps the current edges this document may change. The store then
applies ``desired - current`` and ``current - desired`` through
:meth:`~memory_core.storage.ports.GraphRepository.apply_edges`: re-ingesting an unchanged
document writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory_core.models import Edge, NewEntity, Resource
from memory_core.rules.graph import DocumentPlan, condition_key

__all__ = [
    "ORPHAN_KINDS",
    "RULE_EDGE_TYPES",
    "EntityKey",
    "desired_edges",
    "document_entities",
    "merged_rule_metadata",
    "owned_edges",
]

EntityKey = tuple[str, str]  # (kind, key)

# The edges a rule entity owns by itself (besides has_section / has_directive, owned per source).
RULE_EDGE_TYPES = ("authoritative_for", "layer", "topic", "related", "technology", "when_to_apply")
# Entities that live only through their edges: deleted when their last edge goes.
ORPHAN_KINDS = frozenset({"pattern", "condition", "topic", "technology"})

_LIST_KEYS = ("topics", "authoritative_for", "when_to_apply", "related_rules")
_SINGLE_KEYS = ("rule_name", "title", "format", "layer", "description", "default_severity")


def merged_rule_metadata(sources: Sequence[Resource]) -> dict[str, Any]:
    """A rule's metadata merged over its source documents (merge semantics, Req 7.3).

    Lists are unions in source order; single values come from the most recently written
    source (the highest resource id) that has one.
    """
    merged: dict[str, Any] = {"sources": [], **{key: [] for key in _LIST_KEYS}}
    for resource in sorted(sources, key=lambda r: r.resource_id):
        meta = resource.metadata
        merged["sources"].append(resource.uri)
        for key in _LIST_KEYS:
            for value in meta.get(key) or []:
                if value not in merged[key]:
                    merged[key].append(value)
        for key in _SINGLE_KEYS:
            if meta.get(key) is not None:
                merged[key] = meta[key]
    return merged


def _rule_name(plan: DocumentPlan, merged: Mapping[str, Any]) -> str:
    return str(merged.get("rule_name") or plan.rule_name)


def document_entities(
    plan: DocumentPlan, merged: Mapping[str, Any], resource_id: int
) -> list[NewEntity]:
    """Every entity the document's edges need, the rule first; one per (kind, key), named
    by its first mention (a name only matters when the entity is created)."""
    found: dict[EntityKey, NewEntity] = {}

    def need(kind: str, key: str, name: str, *, rid: int | None = None, meta: Any = None) -> None:
        if (kind, key) not in found:
            found[(kind, key)] = NewEntity(kind, key, name, rid, dict(meta or {}))

    need("rule", plan.rule_id, _rule_name(plan, merged), rid=resource_id)
    for key, display, line in plan.sections:
        need("section", key, display, rid=resource_id, meta={"line": line})
    for topic in merged["authoritative_for"]:
        need("topic", topic, topic)
    for topic in merged["topics"]:
        need("topic", topic, topic)
    if merged.get("layer"):
        need("layer", str(merged["layer"]), str(merged["layer"]))
    for related in merged["related_rules"]:
        if related != plan.rule_id:
            need("rule", related, related)
    for condition in merged["when_to_apply"]:
        need("condition", condition_key(condition), condition)
    for tech, category in plan.technologies.items():
        need("technology", tech, tech, meta={"category": category})
    for d in plan.directives:
        need("severity", d.severity, d.severity)
        if d.layer:
            need("layer", d.layer, d.layer)
        for topic in d.topics:
            need("topic", topic, topic)
        for condition in d.when_to_apply:
            need("condition", condition_key(condition), condition)
        for pattern_key, name in d.patterns:
            need("pattern", pattern_key, name)
    return list(found.values())


def desired_edges(
    plan: DocumentPlan,
    merged: Mapping[str, Any],
    *,
    entities: Mapping[EntityKey, int],
    item_ids: Mapping[str, int],
) -> set[Edge]:
    """The edges the graph holds for this document once written.

    Args:
        plan: the document's plan.
        merged: the rule's metadata merged over all its sources.
        entities: ids of every entity of :func:`document_entities`.
        item_ids: directive uid -> item id.
    """
    rule = entities[("rule", plan.rule_id)]
    sections = {key: entities[("section", key)] for key, _, _ in plan.sections}
    edges: set[Edge] = set()

    def rule_edge(rel: str, kind: str, key: str) -> None:
        edges.add(Edge("entity", rule, rel, "entity", entities[(kind, key)]))

    def item_edge(item_id: int, rel: str, kind: str, key: str) -> None:
        edges.add(Edge("item", item_id, rel, "entity", entities[(kind, key)]))

    for topic in merged["authoritative_for"]:
        rule_edge("authoritative_for", "topic", topic)
    for topic in merged["topics"]:
        rule_edge("topic", "topic", topic)
    if merged.get("layer"):
        rule_edge("layer", "layer", str(merged["layer"]))
    for related in merged["related_rules"]:
        if related != plan.rule_id:
            rule_edge("related", "rule", related)
    for condition in merged["when_to_apply"]:
        rule_edge("when_to_apply", "condition", condition_key(condition))
    for tech in plan.technologies:
        rule_edge("technology", "technology", tech)
    for section_id in sections.values():
        edges.add(Edge("entity", rule, "has_section", "entity", section_id))
    for d in plan.directives:
        item_id = item_ids[d.item.uid]
        edges.add(Edge("entity", rule, "has_directive", "item", item_id))
        if d.section_key in sections:
            edges.add(Edge("entity", sections[d.section_key], "contains", "item", item_id))
        item_edge(item_id, "severity", "severity", d.severity)
        if d.layer:
            item_edge(item_id, "layer", "layer", d.layer)
        for topic in d.topics:
            item_edge(item_id, "topic", "topic", topic)
        for condition in d.when_to_apply:
            item_edge(item_id, "when_to_apply", "condition", condition_key(condition))
        for pattern_key, _ in d.patterns:
            item_edge(item_id, "has_pattern", "pattern", pattern_key)
    return edges


def owned_edges(
    current: Iterable[Edge], *, rule: int, item_ids: Iterable[int], section_ids: Iterable[int]
) -> set[Edge]:
    """Those of ``current`` this document may change: the rule's has_directive and
    has_section edges to other sources' directives and sections are theirs, not ours."""
    items, sections = set(item_ids), set(section_ids)
    return {
        e
        for e in current
        if not (
            e.src_kind == "entity"
            and e.src_id == rule
            and e.rel_type in ("has_directive", "has_section")
            and (
                (e.dst_kind == "item" and e.dst_id not in items)
                or (e.dst_kind == "entity" and e.dst_id not in sections)
            )
        )
    }
