"""The SQLite hierarchy store: categories without twins, leaf-only chunks, keyset order, runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.errors import InvalidInputError
from memory_core.hierarchy.port_store import CHUNK_KIND, PortHierarchyStore
from memory_core.hierarchy.store import NewChunk
from memory_core.models import content_hash
from memory_core.scope import Scope
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio

S, T, OTHER = Scope.of("s"), Scope.of("t"), Scope.of("other")


def chunk(uid: str, text: str, created_at: str) -> NewChunk:
    return NewChunk(uid, text, len(text.split()), content_hash(text), created_at)


async def path(store: PortHierarchyStore, *names: str) -> list[int]:
    ids: list[int] = []
    for level, name in enumerate(names, start=1):
        category = await store.create_category(
            S, parent_id=ids[-1] if ids else None, level=level, name=name
        )
        ids.append(category.category_id)
    return ids


async def test_normalised_names_do_not_make_twins(memoir: Memoir) -> None:
    store = PortHierarchyStore(memoir.store, depth=3)
    first = await store.create_category(S, parent_id=None, level=1, name="Databases")
    again = await store.create_category(S, parent_id=None, level=1, name="  databases ")
    assert again.category_id == first.category_id
    assert await store.count_categories(S) == 1
    # The same name under another parent, or in another scope, is a different category.
    other = await store.create_category(T, parent_id=None, level=1, name="Databases")
    assert other.category_id != first.category_id


async def test_level_and_parent_rules_are_enforced(memoir: Memoir) -> None:
    store = PortHierarchyStore(memoir.store, depth=3)
    top = await store.create_category(S, parent_id=None, level=1, name="Top")
    with pytest.raises(InvalidInputError):
        await store.create_category(S, parent_id=top.category_id, level=1, name="Bad")
    with pytest.raises(InvalidInputError):
        await store.create_category(S, parent_id=None, level=2, name="Orphan")
    with pytest.raises(InvalidInputError):
        await store.create_category(S, parent_id=top.category_id, level=3, name="Skips")
    with pytest.raises(InvalidInputError):
        await store.create_category(S, parent_id=None, level=4, name="Too deep")
    with pytest.raises(InvalidInputError):
        PortHierarchyStore(memoir.store, depth=101)


async def test_chunks_link_only_to_leaf_categories(memoir: Memoir) -> None:
    store = PortHierarchyStore(memoir.store, depth=2)
    top, leaf = await path(store, "Top", "Leaf")
    with pytest.raises(InvalidInputError) as info:
        await store.add_chunks(S, top, [chunk("u1", "text one", "2026-01-01T00:00:00")])
    assert "leaf" in info.value.message
    ids = await store.add_chunks(S, leaf, [chunk("u1", "text one", "2026-01-01T00:00:00")])
    assert len(ids) == 1
    # Chunks are shared-store items: the lexical index finds them.
    from memory_core.storage.ports import LexicalQuery

    hits = await memoir.store.read(
        lambda tx: tx.lexical.search(LexicalQuery(("one",)), Scope.of(S), kinds=[CHUNK_KIND])
    )
    assert [h.item_id for h in hits] == ids


async def test_chunks_come_in_created_at_then_uid_order_with_keyset_pages(
    memoir: Memoir,
) -> None:
    store = PortHierarchyStore(memoir.store, depth=1)
    (leaf,) = await path(store, "Only")
    stamps = ["2026-01-02", "2026-01-01", "2026-01-01", "2026-01-03"]
    uids = ["d", "c", "a", "b"]
    await store.add_chunks(
        S, leaf, [chunk(u, f"text {u}", t) for u, t in zip(uids, stamps, strict=True)]
    )
    seen: list[str] = []
    after = None
    while True:
        page = await store.chunks_in_category(S, leaf, after=after, limit=1)
        if not page:
            break
        seen.extend(c.uid for c in page)
        after = (page[-1].created_at, page[-1].uid)
    assert seen == ["a", "c", "d", "b"]


async def test_runs_are_recorded_per_scope_newest_first(memoir: Memoir) -> None:
    store = PortHierarchyStore(memoir.store, depth=3)
    await store.record_run(S, "hierarchy_query", 1.5, {"n": 1})
    await store.record_run(S, "hierarchy_query", 2.5, {"n": 2})
    await store.record_run(OTHER, "hierarchy_query", 2.5, {"n": 3})
    runs = await store.list_runs(S)
    assert [r["payload"]["n"] for r in runs] == [2, 1]


async def test_the_chunk_lookup_index_exists(tmp_path: Path, memoir: Memoir) -> None:
    def plan(conn: object) -> str:
        rows = conn.execute(  # type: ignore[attr-defined]
            "EXPLAIN QUERY PLAN SELECT item_id FROM item WHERE scope = 's' AND category_id = 1 "
            "AND kind = 'hierarchy_chunk' AND deleted = 0 ORDER BY created_at, uid LIMIT 5"
        ).fetchall()
        return " ".join(str(r[-1]) for r in rows)

    detail = await memoir.store.db.read(plan)
    assert "item_category_created_uid" in detail
