"""Resource, graph, category, log, tombstone and meta contracts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import InvalidInputError
from memory_core.models import Edge, NewEntity, NewItem, NewResource
from memory_core.scope import Scope
from memory_core.storage.ports import ResourceUpdate, Store

pytestmark = pytest.mark.anyio


def resource(scope: Scope, uid: str, uri: str, **extra: object) -> NewResource:
    return NewResource(uid=uid, scope=scope, kind="document", uri=uri, content_hash=uid, **extra)  # type: ignore[arg-type]


async def test_resources_add_find_update_and_delete_with_their_items(
    store: Store, scope: Scope, other_scope: Scope
) -> None:
    ids = await store.write(
        lambda tx: [
            tx.resources.add(
                resource(scope, "doc-1", "docs/a.md", metadata={"rule_id": "r1"}, tags=("t",))
            ),
            tx.resources.add(resource(scope, "doc-2", "docs/sub/b.md")),
            tx.resources.add(resource(scope, "doc-1", "ignored.md")),  # idempotent on uid
            tx.resources.add(resource(other_scope, "doc-3", "docs/a.md")),
        ]
    )
    assert ids[2] == ids[0]
    find = lambda **kw: store.read(lambda tx: [r.uri for r in tx.resources.find(scope, **kw)])  # noqa: E731
    assert await find(uri="docs/a.md") == ["docs/a.md"]
    assert await find(uri_prefix="docs/sub/") == ["docs/sub/b.md"]
    assert await find(uid_prefix="doc-") == ["docs/a.md", "docs/sub/b.md"]
    assert await find(meta={"rule_id": "r1"}) == ["docs/a.md"]
    await store.write(
        lambda tx: tx.resources.update(ids[1], ResourceUpdate(deleted=True, tags=("z",)))
    )
    assert await find() == ["docs/a.md"]
    assert await find(include_deleted=True) == ["docs/a.md", "docs/sub/b.md"]
    got = await store.read(lambda tx: tx.resources.by_uid(["doc-2"]))
    assert got["doc-2"].deleted and got["doc-2"].tags == ("z",)
    item_ids = await store.write(
        lambda tx: tx.items.add(
            [
                NewItem(
                    uid="i", kind="chunk", text="x", token_count=1, scope=scope, resource_id=ids[0]
                )
            ]
        )
    )
    assert await store.write(lambda tx: tx.resources.delete([ids[0]])) == 1
    assert await store.read(lambda tx: tx.items.get(item_ids)) == {}
    assert await store.read(lambda tx: tx.resources.count(scope)) == 0


@pytest.mark.requires_port("graph")
async def test_graph_entities_edges_observations_and_orphans(store: Store, scope: Scope) -> None:
    ents = await store.write(
        lambda tx: tx.graph.ensure_entities(
            scope,
            [
                NewEntity("rule", "r1", "Rule 1", metadata={"a": 1}),
                NewEntity("topic", "auth", "Auth"),
                NewEntity("topic", "db", "DB"),
            ],
        )
    )
    again = await store.write(
        lambda tx: tx.graph.ensure_entities(scope, [NewEntity("topic", "auth", "AUTH!")])
    )
    assert again[("topic", "auth")] == ents[("topic", "auth")]
    rule, auth, db = ents[("rule", "r1")], ents[("topic", "auth")], ents[("topic", "db")]
    e1, e2 = (
        Edge("entity", rule, "topic", "entity", auth),
        Edge("entity", rule, "topic", "entity", db),
    )
    assert (
        await store.write(lambda tx: tx.graph.apply_edges(scope, add=[e1, e2, e1], remove=[])) == 2
    )
    assert await store.write(lambda tx: tx.graph.apply_edges(scope, add=[e1], remove=[e2])) == 0
    assert await store.read(lambda tx: tx.graph.edges(scope, sources=[("entity", rule)])) == {e1}
    assert await store.read(
        lambda tx: tx.graph.edges(scope, targets=[("entity", auth)], rel_types=["topic"])
    ) == {e1}
    assert await store.read(lambda tx: sorted(tx.graph.orphans(scope, [rule, auth, db]))) == [db]
    obs = await store.write(
        lambda tx: tx.graph.add_observations(scope, auth, ["uses OAuth", "uses OAuth", "2FA"])
    )
    assert len(obs) == 2
    assert [t for _, t in (await store.read(lambda tx: tx.graph.observations([auth])))[auth]] == [
        "uses OAuth",
        "2FA",
    ]
    assert (
        await store.write(
            lambda tx: tx.graph.update_entity(rule, name="Rule One", metadata={"b": 2})
        )
        is True
    )
    found = await store.read(lambda tx: tx.graph.find_entities(scope, kinds=["rule"]))
    assert [(e.key, e.name, e.metadata) for e in found] == [("r1", "Rule One", {"b": 2})]
    assert await store.write(lambda tx: tx.graph.delete_entities([auth])) == 1
    assert await store.read(lambda tx: tx.graph.edges(scope)) == set()
    assert await store.read(lambda tx: tx.graph.observations([auth])) == {}
    v0 = await store.read(lambda tx: tx.graph.version(scope))
    await store.write(lambda tx: tx.graph.bump_version(scope))
    assert await store.read(lambda tx: tx.graph.version(scope)) == v0 + 1


async def test_categories_tree_rules_and_counts(
    store: Store, scope: Scope, other_scope: Scope
) -> None:
    db = await store.write(
        lambda tx: tx.categories.create(scope, parent_id=None, level=1, name="Databases")
    )
    twin = await store.write(
        lambda tx: tx.categories.create(scope, parent_id=None, level=1, name="  databases ")
    )
    assert twin.category_id == db.category_id and twin.name == "Databases"
    pg = await store.write(
        lambda tx: tx.categories.create(scope, parent_id=db.category_id, level=2, name="Postgres")
    )
    mysql = await store.write(
        lambda tx: tx.categories.create(scope, parent_id=db.category_id, level=2, name="MySQL")
    )
    for bad in (
        dict(parent_id=None, level=2, name="x"),
        dict(parent_id=db.category_id, level=1, name="x"),
        dict(parent_id=db.category_id, level=3, name="x"),
        dict(parent_id=None, level=1, name="   "),
    ):
        with pytest.raises(InvalidInputError):
            await store.write(lambda tx, b=bad: tx.categories.create(scope, **b))  # type: ignore[misc]
    with pytest.raises(InvalidInputError):  # a parent from another scope
        await store.write(
            lambda tx: tx.categories.create(
                other_scope, parent_id=db.category_id, level=2, name="x"
            )
        )
    children = await store.read(lambda tx: tx.categories.children(scope, db.category_id))
    assert [c.name for c in children] == ["MySQL", "Postgres"]
    await store.write(
        lambda tx: tx.items.add(
            [
                NewItem(
                    uid=f"i{n}",
                    kind="hierarchy_chunk",
                    text="x",
                    token_count=1,
                    scope=scope,
                    category_id=pg.category_id,
                )
                for n in range(3)
            ]
        )
    )
    assert await store.read(lambda tx: tx.categories.item_counts(scope)) == {pg.category_id: 3}
    with pytest.raises(InvalidInputError):
        await store.write(lambda tx: tx.categories.update(mysql.category_id, name="postgres"))
    with pytest.raises(InvalidInputError):
        await store.write(lambda tx: tx.categories.delete([db.category_id]))
    assert await store.write(lambda tx: tx.categories.delete([pg.category_id])) == 1
    assert await store.read(lambda tx: tx.categories.item_counts(scope)) == {}
    assert await store.read(lambda tx: tx.items.count(scope)) == 3  # unfiled, not deleted
    assert await store.read(
        lambda tx: (tx.categories.count(scope), tx.categories.count(other_scope))
    ) == (2, 0)


async def test_runs_and_events_newest_first_with_pruning(
    store: Store, scope: Scope, other_scope: Scope
) -> None:
    for n in range(5):
        await store.write(
            lambda tx, n=n: tx.log.record_run(scope, "search", took_ms=float(n), payload={"n": n})
        )  # type: ignore[misc]
    await store.write(lambda tx: tx.log.record_run(scope, "rules_query", took_ms=1.0, payload={}))
    await store.write(lambda tx: tx.log.record_run(other_scope, "search", took_ms=1.0, payload={}))
    runs = await store.read(lambda tx: tx.log.runs(scope, kinds=["search"], limit=3))
    assert [r.payload["n"] for r in runs] == [4, 3, 2]
    assert await store.write(lambda tx: tx.log.prune_runs(scope, "search", keep=2)) == 3
    assert len(await store.read(lambda tx: tx.log.runs(scope, limit=50))) == 3
    await store.write(
        lambda tx: tx.log.record_event(
            scope, "pin", subject="1", created_at="2026-01-01T00:00:00+00:00"
        )
    )
    await store.write(
        lambda tx: tx.log.record_event(
            scope,
            "forget",
            subject="2",
            payload={"why": "asked"},
            created_at="2026-02-01T00:00:00+00:00",
        )
    )
    events = await store.read(lambda tx: tx.log.events(scope))
    assert [e.kind for e in events] == ["forget", "pin"] and events[0].payload == {"why": "asked"}
    assert [
        e.kind for e in await store.read(lambda tx: tx.log.events(scope, since="2026-01-15"))
    ] == ["forget"]
    assert await store.read(lambda tx: tx.log.events(other_scope)) == []


@pytest.mark.requires_port("tombstones")
async def test_tombstones_expire_and_purge(store: Store, scope: Scope) -> None:
    await store.write(
        lambda tx: tx.tombstones.add(
            scope, "memory", "digest-1", expires_at="2026-01-02T00:00:00+00:00"
        )
    )
    await store.write(lambda tx: tx.tombstones.add(scope, "memory", "digest-2"))
    live = await store.read(
        lambda tx: tx.tombstones.find(
            scope, "memory", ["digest-1", "digest-2", "x"], now="2026-01-01T00:00:00+00:00"
        )
    )
    assert set(live) == {"digest-1", "digest-2"}
    later = await store.read(
        lambda tx: tx.tombstones.find(
            scope, "memory", ["digest-1", "digest-2"], now="2026-01-03T00:00:00+00:00"
        )
    )
    assert set(later) == {"digest-2"}
    assert (
        await store.write(
            lambda tx: tx.tombstones.purge(scope, expired_before="2026-01-03T00:00:00+00:00")
        )
        == 1
    )
    assert await store.write(lambda tx: tx.tombstones.purge(scope, kinds=["memory"])) == 1


async def test_meta_values_and_counters(store: Store) -> None:
    await store.write(lambda tx: tx.meta.set("k", "v1"))
    await store.write(lambda tx: tx.meta.set("k", "v2"))
    assert await store.read(lambda tx: tx.meta.get("k")) == "v2"
    assert await store.read(lambda tx: tx.meta.get("missing")) is None
    assert [await store.write(lambda tx: tx.meta.bump("counter")) for _ in range(3)] == [1, 2, 3]
    assert (await store.read(lambda tx: tx.meta.all()))["k"] == "v2"


async def test_structured_selects_order_page_and_count(store: Store, scope: Scope) -> None:
    from memory_core.filters import Compare

    res = await store.write(
        lambda tx: [
            tx.resources.add(
                resource(scope, f"d{i}", f"docs/{name}.md", mtime=f"2026-0{i + 1}-01", size=10)
            )
            for i, name in enumerate(["b", "a", "c"])
        ]
    )
    await store.write(
        lambda tx: tx.items.add(
            [
                NewItem(
                    uid=f"i{n}",
                    kind="chunk",
                    text="x " * (n + 1),
                    token_count=n + 1,
                    scope=scope,
                    resource_id=res[n % 3],
                )
                for n in range(6)
            ]
        )
    )
    ids, total = await store.read(
        lambda tx: tx.items.select(
            scope, kinds=["chunk"], order_by="item.token_count", descending=True, limit=2, offset=1
        )
    )
    items = await store.read(lambda tx: tx.items.get(ids))
    assert total == 6 and [items[i].token_count for i in ids] == [5, 4]
    only_a, total_a = await store.read(
        lambda tx: tx.items.select(scope, where=Compare("resource.uri", "=", "docs/a.md"))
    )
    assert total_a == 2 and len(only_a) == 2
    docs, docs_total = await store.read(
        lambda tx: tx.resources.select(
            scope,
            kinds=["document"],
            item_kinds=["chunk"],
            where=Compare("item.token_count", ">=", 5),
            order_by="resource.uri",
        )
    )
    found = await store.read(lambda tx: tx.resources.get(docs))
    assert docs_total == 2 and [found[d].uri for d in docs] == ["docs/a.md", "docs/c.md"]
    by_max, _ = await store.read(
        lambda tx: tx.resources.select(
            scope, item_kinds=["chunk"], order_by="item.token_count", descending=True
        )
    )
    assert by_max == [res[2], res[1], res[0]]  # largest chunk of each: 6, 5, 4
    totals = await store.read(lambda tx: tx.items.totals(scope, kinds=["chunk"]))
    assert (totals.items, totals.tokens) == (6, 21)
    await store.write(lambda tx: tx.resources.update(res[0], ResourceUpdate(deleted=True)))
    rt = await store.read(lambda tx: tx.resources.totals(scope, kinds=["document"]))
    assert (rt.live, rt.deleted, rt.bytes, rt.newest_mtime) == (2, 1, 20, "2026-03-01")
    everywhere = await store.read(lambda tx: tx.resources.find(None, include_deleted=True))
    assert len(everywhere) == 3
    assert len(await store.read(lambda tx: tx.items.find(None, kinds=["chunk"]))) == 6


@pytest.mark.requires_port("graph", "tombstones")
async def test_dump_and_restore_round_trip_through_natural_keys(
    store: Store, scope: Scope, store_factory: Any, tmp_path: Path
) -> None:
    from store_testkit import unit_vectors

    from memory_core.models import ItemUpdate

    res = await store.write(
        lambda tx: tx.resources.add(resource(scope, "doc", "a.md", tags=("x",)))
    )
    cat = await store.write(
        lambda tx: tx.categories.create(scope, parent_id=None, level=1, name="Top")
    )
    leaf = await store.write(
        lambda tx: tx.categories.create(scope, parent_id=cat.category_id, level=2, name="Leaf")
    )
    ids = await store.write(
        lambda tx: tx.items.add(
            [
                NewItem(
                    uid="a",
                    kind="chunk",
                    text="alpha",
                    token_count=1,
                    scope=scope,
                    resource_id=res,
                    simhash=12345,
                ),
                NewItem(
                    uid="b",
                    kind="hierarchy_chunk",
                    text="beta",
                    token_count=1,
                    scope=scope,
                    category_id=leaf.category_id,
                ),
            ],
            unit_vectors(2),
        )
    )
    await store.write(lambda tx: tx.items.update(ids[0], ItemUpdate(superseded_by=ids[1])))
    ents = await store.write(
        lambda tx: tx.graph.ensure_entities(scope, [NewEntity("topic", "t", "T", resource_id=res)])
    )
    await store.write(
        lambda tx: tx.graph.apply_edges(
            scope, add=[Edge("item", ids[0], "topic", "entity", ents[("topic", "t")])], remove=[]
        )
    )
    await store.write(
        lambda tx: tx.graph.add_observations(scope, ents[("topic", "t")], ["o1", "o2"])
    )
    await store.write(lambda tx: tx.tombstones.add(scope, "memory", "d", expires_at="2099-01-01"))
    await store.write(lambda tx: tx.log.record_event(scope, "pin", subject="a"))
    await store.write(lambda tx: tx.log.record_run(scope, "search", took_ms=1.5, payload={"q": 1}))
    first: list[dict[str, object]] = []
    assert await store.dump(None, first.append) == len(first)
    types = {r["type"] for r in first}
    assert {"resource", "category", "entity", "item", "supersede", "relation", "observation",
            "tombstone", "event", "run"} <= types  # fmt: skip
    assert not any("id" in r or "item_id" in r or "resource_id" in r for r in first)
    (tmp_path / "second").mkdir()
    other = await store_factory(tmp_path / "second")
    try:
        written = await other.restore(first)
        assert written["item"] == 2 and written["relation"] == 1
        second: list[dict[str, object]] = []
        await other.dump(None, second.append)
        assert second == first
        assert sum((await other.restore(first)).values()) == 0  # restoring again adds nothing
        near = await other.read(lambda tx: tx.items.near_simhash(scope, 12345))
        assert [i.uid for i in near] == ["a"]
        found = await other.read(lambda tx: tx.vectors.vectors([i.item_id for i in near]))
        assert len(found) == 1
    finally:
        await other.close()
