"""Deleting an entity finds its edges through the relation indexes, not a scan of every scope.

Rules re-parse deletes section entities on every upsert, and a shared store holds many projects'
graphs. SQLite counts the virtual-machine instructions a statement runs, so the test compares the
work of deleting one entity beside 100 relations of other scopes with the work beside 5,000: a
scan grows fiftyfold, the indexed delete stays flat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_core.models import Edge, NewEntity
from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.sqlite.store import SqliteStore
from memory_core.storage.sqlite.tx import SqliteTx

pytestmark = pytest.mark.anyio


async def _delete_cost(path: Path, other_edges: int) -> tuple[int, int, set[Edge]]:
    store = await open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteStore)
    mine, other = Scope.of("project-a"), Scope.of("project-b")

    def build(tx: Any) -> tuple[int, int]:
        ents = tx.graph.ensure_entities(
            mine, [NewEntity("rule", "r", "R"), NewEntity("topic", "t", "T")]
        )
        rule, topic = ents[("rule", "r")], ents[("topic", "t")]
        tx.graph.apply_edges(
            mine,
            add=[
                Edge("entity", rule, "topic", "entity", topic),
                Edge("entity", topic, "related", "entity", rule),
            ],
            remove=[],
        )
        hubs = tx.graph.ensure_entities(other, [NewEntity("topic", "hub", "Hub")])
        hub = hubs[("topic", "hub")]
        tx.graph.apply_edges(
            other,
            add=[Edge("entity", hub, "related", "item", n) for n in range(other_edges)],
            remove=[],
        )
        return rule, hub

    rule, hub = await store.write(build)

    def delete(conn: Any) -> tuple[int, int]:
        steps = [0]

        def tick() -> int:
            steps[0] += 1
            return 0

        conn.set_progress_handler(tick, 1)
        try:
            deleted = SqliteTx(conn).graph.delete_entities([rule])
        finally:
            conn.set_progress_handler(None, 1)
        return steps[0], deleted

    try:
        steps, deleted = await store.db.write(delete)
        left = await store.read(lambda tx: tx.graph.edges(mine) | tx.graph.edges(other))
        assert all(e.src_id == hub for e in left)  # other scopes' edges stay
        return steps, deleted, left
    finally:
        await store.close()


async def test_deleting_an_entity_does_not_scan_other_scopes_relations(tmp_path: Path) -> None:
    small, deleted_small, left_small = await _delete_cost(tmp_path / "small.db", 100)
    large, deleted_large, left_large = await _delete_cost(tmp_path / "large.db", 5_000)
    assert deleted_small == deleted_large == 1
    assert (len(left_small), len(left_large)) == (100, 5_000)  # both edges of the rule went
    # 50x the relations: a scan would cost ~50x the instructions; the indexes a B-tree step more.
    assert large < small * 2, f"delete ran {small} then {large} instructions: it scans relation"
