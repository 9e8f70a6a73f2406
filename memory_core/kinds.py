"""The closed sets of kinds stored in the one data model (DESIGN §2), in one place.

Every item, resource, run and event carries a kind from these registries; the storage layer
filters by them and the hybrid engine searches one or several item kinds at once. Adding a
kind is one edit here (and, for items, a decision on whether it is searchable by default).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "CHUNK",
    "DIRECTIVE",
    "DOCUMENT",
    "EVENT_KINDS",
    "HIERARCHY_CHUNK",
    "ITEM_KINDS",
    "LAYER_ITEM",
    "MEMORY",
    "MEMORY_NODE",
    "RESOURCE_KINDS",
    "RULE_DOCUMENT",
    "RUN_KINDS",
    "EventKind",
    "ItemKind",
    "ResourceKind",
    "RunKind",
    "check_item_kind",
]

ItemKind = Literal[
    "chunk",  # a window of an ingested document (Recall)
    "directive",  # one directive of a rule document (rules graph)
    "hierarchy_chunk",  # a chunk filed under a leaf category (memoirAI)
    "memory",  # an agent memory (Theoria)
    "layer_item",  # a memory item of the application memory layer (multimodal)
    "memory_node",  # an entity of the official memory server's graph, indexed for search
]
ResourceKind = Literal[
    "document",  # a file or virtual path ingested by `memoir add`
    "rule_document",  # a rule file
    "conversation",  # a conversation memorised by the memory layer
    "file",  # a file memorised by the memory layer
    "text",  # free text
]
RunKind = Literal[
    "search",
    "rules_query",
    "hierarchy_query",
    "hierarchy_ingest",
    "memory_recall",
    "memory_backfill",
    "memorize",
    "retrieve",
    "evolve",
]
EventKind = Literal[
    "remember",
    "merge",
    "pin",
    "unpin",
    "forget",
    "trim",
    "trim_blocked",
    "settings",
    "incognito",
    "supersede",
    "rollup",
    "retention",
    "import",
    "tool_call",
    "blocked",  # a remember refused by a forget tombstone
    "used",  # recalled memories the caller says it used (hit rate)
    "export",
    "embed_failure",
]

ITEM_KINDS: tuple[ItemKind, ...] = get_args(ItemKind)
RESOURCE_KINDS: tuple[ResourceKind, ...] = get_args(ResourceKind)
RUN_KINDS: tuple[RunKind, ...] = get_args(RunKind)
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)

CHUNK: ItemKind = "chunk"
DIRECTIVE: ItemKind = "directive"
HIERARCHY_CHUNK: ItemKind = "hierarchy_chunk"
MEMORY: ItemKind = "memory"
LAYER_ITEM: ItemKind = "layer_item"
MEMORY_NODE: ItemKind = "memory_node"
DOCUMENT: ResourceKind = "document"
RULE_DOCUMENT: ResourceKind = "rule_document"


def check_item_kind(kind: str) -> ItemKind:
    """``kind`` as an :data:`ItemKind`.

    Raises:
        ValueError: not a registered item kind (a programming error, not user input).
    """
    if kind not in ITEM_KINDS:
        raise ValueError(f"unknown item kind {kind!r}; known: {', '.join(ITEM_KINDS)}")
    return kind  # type: ignore[return-value,unused-ignore]
