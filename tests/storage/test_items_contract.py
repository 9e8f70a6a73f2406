"""ItemRepository contract: items with their lexical and vector rows, as one unit."""

from __future__ import annotations

import pytest
from store_testkit import DIM, unit_vectors

from memory_core.errors import EmbeddingError, InvalidInputError
from memory_core.filters import Compare
from memory_core.models import Edge, ItemUpdate, NewEntity, NewItem
from memory_core.scope import Scope
from memory_core.storage.ports import LexicalQuery, Store

pytestmark = pytest.mark.anyio


def item(scope: Scope, uid: str, text: str, **extra: object) -> NewItem:
    return NewItem(
        uid=uid, kind="chunk", text=text, token_count=len(text.split()), scope=scope, **extra
    )  # type: ignore[arg-type]


async def test_add_is_idempotent_on_uid_and_returns_the_same_ids(
    store: Store, scope: Scope
) -> None:
    first = await store.write(
        lambda tx: tx.items.add([item(scope, "a", "alpha"), item(scope, "b", "beta")])
    )
    again = await store.write(
        lambda tx: tx.items.add([item(scope, "b", "beta changed"), item(scope, "a", "alpha")])
    )
    assert again == [first[1], first[0]]
    stored = await store.read(lambda tx: tx.items.get(first))
    assert stored[first[1]].text == "beta"  # the stored item was left as it was
    assert await store.read(lambda tx: tx.items.count(scope)) == 2


async def test_add_writes_lexical_and_vector_rows_with_the_item(store: Store, scope: Scope) -> None:
    vectors = unit_vectors(2)
    ids = await store.write(
        lambda tx: tx.items.add(
            [item(scope, "a", "postgres index tuning"), item(scope, "b", "sourdough bread")],
            vectors,
        )
    )
    lexical = await store.read(lambda tx: tx.lexical.search(LexicalQuery(("postgres",)), scope))
    assert [h.item_id for h in lexical] == [ids[0]]
    found = await store.read(lambda tx: tx.vectors.vectors(ids))
    assert set(found) == set(ids)
    assert found[ids[1]] == pytest.approx(vectors[1], abs=1e-6)


async def test_vectors_must_match_items_and_dimension(store: Store, scope: Scope) -> None:
    with pytest.raises(InvalidInputError):
        await store.write(lambda tx: tx.items.add([item(scope, "a", "x")], unit_vectors(2)))
    wrong = unit_vectors(1)[:, : DIM - 1]
    with pytest.raises(EmbeddingError):
        await store.write(lambda tx: tx.items.add([item(scope, "a", "x")], wrong))
    assert await store.read(lambda tx: tx.items.count(scope)) == 0  # nothing half-written


async def test_by_uid_and_metadata_projection(store: Store, scope: Scope) -> None:
    ids = await store.write(
        lambda tx: tx.items.add(
            [item(scope, "a", "x", metadata={"keep": 1, "big": "y" * 100}, tags=("t",))]
        )
    )
    by_uid = await store.read(lambda tx: tx.items.by_uid(["a", "missing"]))
    assert set(by_uid) == {"a"} and by_uid["a"].item_id == ids[0] and by_uid["a"].tags == ("t",)
    projected = await store.read(lambda tx: tx.items.get(ids, meta_keys=["keep"]))
    assert projected[ids[0]].metadata == {"keep": 1}


async def test_update_rewrites_the_lexical_row_and_drops_a_stale_vector(
    store: Store, scope: Scope
) -> None:
    ids = await store.write(
        lambda tx: tx.items.add([item(scope, "a", "old words here")], unit_vectors(1))
    )
    changed = await store.write(
        lambda tx: tx.items.update(
            ids[0], ItemUpdate(text="fresh words", pinned=True, importance=0.9, tags=("new",))
        )
    )
    assert changed is True
    got = (await store.read(lambda tx: tx.items.get(ids)))[ids[0]]
    assert (got.text, got.pinned, got.importance, got.tags) == ("fresh words", True, 0.9, ("new",))
    assert await store.read(lambda tx: tx.lexical.search(LexicalQuery(("old",)), scope)) == []
    assert [
        h.item_id
        for h in await store.read(lambda tx: tx.lexical.search(LexicalQuery(("fresh",)), scope))
    ] == ids
    assert (
        await store.read(lambda tx: tx.vectors.vectors(ids)) == {}
    )  # the old vector described old text
    new_vector = unit_vectors(1, seed=9)[0]
    await store.write(lambda tx: tx.items.update(ids[0], ItemUpdate(vector=new_vector)))
    assert (await store.read(lambda tx: tx.vectors.vectors(ids)))[ids[0]] == pytest.approx(
        new_vector, abs=1e-6
    )
    assert await store.write(lambda tx: tx.items.update(10_000, ItemUpdate(pinned=True))) is False


async def test_delete_removes_index_rows_edges_and_supersession_links(
    store: Store, scope: Scope
) -> None:
    ids = await store.write(
        lambda tx: tx.items.add(
            [item(scope, "a", "apple pie"), item(scope, "b", "apple tart")], unit_vectors(2)
        )
    )
    await store.write(lambda tx: tx.items.update(ids[0], ItemUpdate(superseded_by=ids[1])))
    graph = "graph" in store.capabilities  # MySQL/MariaDB has no graph port: no edges to drop
    if graph:
        topic = await store.write(
            lambda tx: tx.graph.ensure_entities(scope, [NewEntity("topic", "food", "Food")])
        )
        edge = Edge("item", ids[1], "topic", "entity", topic[("topic", "food")])
        await store.write(lambda tx: tx.graph.apply_edges(scope, add=[edge], remove=[]))
    assert await store.write(lambda tx: tx.items.delete([ids[1]])) == 1
    assert [
        h.item_id
        for h in await store.read(lambda tx: tx.lexical.search(LexicalQuery(("apple",)), scope))
    ] == [ids[0]]
    assert set(await store.read(lambda tx: tx.vectors.vectors(ids))) == {ids[0]}
    if graph:
        assert await store.read(lambda tx: tx.graph.edges(scope)) == set()
    assert (await store.read(lambda tx: tx.items.get(ids)))[ids[0]].superseded_by is None


@pytest.mark.parametrize("order", ["id", "created", "offset", "recent"])
async def test_find_pages_through_every_item_once_in_order(
    store: Store, scope: Scope, order: str
) -> None:
    rows = [
        item(
            scope,
            f"u{i:02d}",
            f"text {i}",
            start_offset=i * 10,
            created_at=f"2026-01-{1 + i % 5:02d}T00:00:00+00:00",
        )
        for i in range(23)
    ]
    await store.write(lambda tx: tx.items.add(rows))
    seen = []
    after = None
    while True:
        page = await store.read(
            lambda tx, a=after: tx.items.find(scope, order=order, after=a, limit=5)
        )  # type: ignore[misc]
        if not page:
            break
        seen.extend(page)
        after = page[-1]
    assert sorted(i.uid for i in seen) == sorted(r.uid for r in rows)
    assert len(seen) == len(rows)
    if order == "created":
        keys = [(i.created_at, i.uid) for i in seen]
        assert keys == sorted(keys)
    if order == "offset":
        assert [i.start_offset for i in seen] == sorted(i.start_offset or 0 for i in seen)
    if order == "recent":
        keys = [(i.updated_at, i.item_id) for i in seen]
        assert keys == sorted(keys, reverse=True)


async def test_find_and_count_filter_by_kind_scope_and_filter(
    store: Store, scope: Scope, other_scope: Scope
) -> None:
    await store.write(
        lambda tx: tx.items.add(
            [
                item(scope, "a", "x", tags=("red",), importance=0.9),
                item(scope, "b", "y", tags=("blue",)),
                NewItem(
                    uid="c", kind="memory", text="z", token_count=1, scope=scope, tags=("red",)
                ),
                item(other_scope, "d", "x", tags=("red",)),
            ]
        )
    )
    red = Compare("item.tags", "=", "red")
    assert await store.read(lambda tx: tx.items.count(scope, where=red)) == 2
    assert await store.read(lambda tx: tx.items.count(scope, kinds=["chunk"], where=red)) == 1
    assert await store.read(lambda tx: tx.items.count(None, where=red)) == 3
    found = await store.read(
        lambda tx: tx.items.find(scope, where=Compare("item.importance", ">", 0.5))
    )
    assert [i.uid for i in found] == ["a"]


async def test_near_simhash_finds_within_three_bits_through_the_index(
    store: Store, scope: Scope, other_scope: Scope
) -> None:
    base = 0xF0F0_1234_5678_9ABC
    near = base ^ 0b111  # 3 bits apart
    far = base ^ 0b1111  # 4 bits apart
    top = base ^ (1 << 63)  # 1 bit apart, the sign bit of a signed 64-bit column
    await store.write(
        lambda tx: tx.items.add(
            [
                item(scope, "near", "n", simhash=near),
                item(scope, "far", "f", simhash=far),
                item(scope, "top", "t", simhash=top),
                item(other_scope, "elsewhere", "e", simhash=base),
            ]
        )
    )
    found = await store.read(lambda tx: tx.items.near_simhash(scope, base))
    assert [i.uid for i in found] == ["top", "near"]  # nearest first
    assert found[0].simhash == top  # read back unsigned
    with pytest.raises(InvalidInputError):
        await store.read(lambda tx: tx.items.near_simhash(scope, base, max_distance=9))


async def test_a_failed_write_leaves_nothing_behind(store: Store, scope: Scope) -> None:
    def write_then_fail(tx):  # type: ignore[no-untyped-def]
        tx.items.add([item(scope, "a", "rollback me")], unit_vectors(1))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await store.write(write_then_fail)
    assert await store.read(lambda tx: tx.items.count(None)) == 0
    assert await store.read(lambda tx: tx.lexical.search(LexicalQuery(("rollback",)), None)) == []
    assert await store.read(lambda tx: tx.vectors.count()) == 0
