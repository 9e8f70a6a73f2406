"""The rule graph's edges and merged metadata are decided by pure code (storage applies them)."""

from __future__ import annotations

from typing import Any

from rule_texts import AUTH_RULE

from memory_core.models import Edge, Resource
from memory_core.rules.graph import build_plan
from memory_core.rules.graph_diff import (
    desired_edges,
    document_entities,
    merged_rule_metadata,
    owned_edges,
)
from memory_core.rules.topics import TopicNormalizer
from memory_core.scope import Scope
from memory_core.tokens import create_token_counter
from rules_parser import parse


def _resource(resource_id: int, uri: str, **meta: Any) -> Resource:
    return Resource(
        resource_id, f"u{resource_id}", "s", "rule_document", uri, "h", None, None, (), None,
        "t", "t", False, {"rule_id": "auth", **meta},
    )  # fmt: skip


def test_merge_unions_lists_and_the_latest_source_wins_single_values() -> None:
    merged = merged_rule_metadata(
        [
            _resource(7, "b.md", topics=["sessions", "auth"], layer="backend", title="B"),
            _resource(3, "a.md", topics=["auth"], layer="api", title="A", related_rules=["x"]),
        ]
    )
    # Written order is resource-id order, whatever order the store answered in.
    assert merged["sources"] == ["a.md", "b.md"]
    assert merged["topics"] == ["auth", "sessions"]
    assert merged["related_rules"] == ["x"]
    assert (merged["layer"], merged["title"]) == ("backend", "B")


def _plan() -> Any:
    document = parse(AUTH_RULE, "auth.md").document
    assert document is not None
    return build_plan(
        document,
        scope=Scope.of("s"),
        uri="auth.md",
        tokens=create_token_counter("chars4"),
        topics=TopicNormalizer(),
    )


def test_every_edge_points_at_a_named_entity_and_each_directive_is_linked() -> None:
    plan = _plan()
    merged = merged_rule_metadata([_resource(1, "auth.md", **plan.resource_metadata)])
    needed = document_entities(plan, merged, resource_id=1)
    assert needed[0].kind == "rule" and needed[0].key == plan.rule_id
    assert len({(e.kind, e.key) for e in needed}) == len(needed)
    ids = {(e.kind, e.key): 100 + n for n, e in enumerate(needed)}
    items = {d.item.uid: n for n, d in enumerate(plan.directives)}
    edges = desired_edges(plan, merged, entities=ids, item_ids=items)
    rule = ids[("rule", plan.rule_id)]
    linked = {e.dst_id for e in edges if e.src_id == rule and e.rel_type == "has_directive"}
    assert linked == set(items.values())
    assert {e.dst_id for e in edges if e.dst_kind == "entity"} <= set(ids.values())
    # The same inputs give the same edges: re-ingesting an unchanged document writes nothing.
    assert desired_edges(plan, merged, entities=ids, item_ids=items) == edges


def test_edges_to_other_sources_directives_and_sections_are_not_ours() -> None:
    current = {
        Edge("entity", 1, "has_directive", "item", 10),  # ours
        Edge("entity", 1, "has_directive", "item", 99),  # another document's directive
        Edge("entity", 1, "has_section", "entity", 20),  # ours
        Edge("entity", 1, "has_section", "entity", 98),  # another document's section
        Edge("entity", 1, "topic", "entity", 50),  # the rule's own
    }
    kept = owned_edges(current, rule=1, item_ids=[10], section_ids=[20])
    assert kept == current - {
        Edge("entity", 1, "has_directive", "item", 99),
        Edge("entity", 1, "has_section", "entity", 98),
    }
