"""LexicalIndex and VectorIndex contract, and the store's own vector paths."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_testkit import unit_vectors

from memory_core.filters import Compare, InList, Not
from memory_core.models import NewItem, NewResource
from memory_core.scope import Scope
from memory_core.storage.ports import LexicalQuery, Store

pytestmark = pytest.mark.anyio


def chunk(scope: Scope, uid: str, text: str, **extra: object) -> NewItem:
    return NewItem(
        uid=uid, kind="chunk", text=text, token_count=len(text.split()), scope=scope, **extra
    )  # type: ignore[arg-type]


async def test_and_requires_every_term_or_any_and_scores_are_higher_better(
    store: Store, scope: Scope
) -> None:
    ids = await store.write(
        lambda tx: tx.items.add(
            [
                chunk(scope, "a", "retry with exponential backoff and retry budget retry"),
                chunk(scope, "b", "retry once"),
                chunk(scope, "c", "backoff only"),
            ]
        )
    )
    both = await store.read(
        lambda tx: tx.lexical.search(LexicalQuery(("retry", "backoff"), "AND"), scope)
    )
    assert [h.item_id for h in both] == [ids[0]]
    either = await store.read(
        lambda tx: tx.lexical.search(LexicalQuery(("retry", "backoff"), "OR"), scope)
    )
    assert set(h.item_id for h in either) == set(ids)
    assert [h.score for h in either] == sorted((h.score for h in either), reverse=True)
    assert either[0].item_id == ids[0]  # three mentions and both terms beat one mention


async def test_stemming_and_tags_are_searchable(store: Store, scope: Scope) -> None:
    ids = await store.write(
        lambda tx: tx.items.add([chunk(scope, "a", "the workers were retrying", tags=("kafka",))])
    )
    assert [
        h.item_id
        for h in await store.read(lambda tx: tx.lexical.search(LexicalQuery(("retries",)), scope))
    ] == ids
    assert [
        h.item_id
        for h in await store.read(lambda tx: tx.lexical.search(LexicalQuery(("kafka",)), scope))
    ] == ids


async def test_scope_and_kind_never_leak(store: Store, scope: Scope, other_scope: Scope) -> None:
    await store.write(
        lambda tx: tx.items.add(
            [
                chunk(other_scope, "o", "secret plan"),
                NewItem(uid="m", kind="memory", text="secret memory", token_count=2, scope=scope),
                chunk(scope, "c", "secret chunk"),
            ]
        )
    )
    hits = await store.read(
        lambda tx: tx.lexical.search(LexicalQuery(("secret",)), scope, kinds=["chunk"])
    )
    items = await store.read(lambda tx: tx.items.get([h.item_id for h in hits]))
    assert [i.uid for i in items.values()] == ["c"]


async def test_a_selective_filter_never_starves_the_lexical_arm(store: Store, scope: Scope) -> None:
    res = await store.write(
        lambda tx: [
            tx.resources.add(
                NewResource(
                    uid=f"r{i}",
                    scope=scope,
                    kind="document",
                    uri=f"{d}/f{i}.md",
                    content_hash=str(i),
                )
            )
            for i, d in enumerate(["docs"] * 300 + ["src"] * 2)
        ]
    )
    # Many better-ranked matches in docs/, the two wanted ones in src/ rank last.
    rows = [
        chunk(scope, f"d{i}", "cache cache cache cache", resource_id=res[i]) for i in range(300)
    ]
    rows += [
        chunk(scope, f"s{i}", "cache " + "filler " * 40, resource_id=res[300 + i]) for i in range(2)
    ]
    await store.write(lambda tx: tx.items.add(rows))
    hits = await store.read(
        lambda tx: tx.lexical.search(
            LexicalQuery(("cache",)),
            scope,
            where=Compare("resource.uri", "GLOB", "src/**"),
            limit=5,
        )
    )
    assert len(hits) == 2


async def test_filters_on_tags_metadata_in_lists_and_negation(store: Store, scope: Scope) -> None:
    ids = await store.write(
        lambda tx: tx.items.add(
            [
                chunk(scope, "a", "token", tags=("x", "y"), metadata={"role": "user"}),
                chunk(scope, "b", "token", tags=("y",), metadata={"role": "assistant"}),
                chunk(scope, "c", "token", metadata={}),
            ]
        )
    )

    async def matching(where):  # type: ignore[no-untyped-def]
        hits = await store.read(
            lambda tx: tx.lexical.search(LexicalQuery(("token",)), scope, where=where)
        )
        return sorted(h.item_id for h in hits)

    assert await matching(Compare("item.tags", "=", "x")) == [ids[0]]
    assert await matching(InList("item.tags", ("x", "y"))) == [ids[0], ids[1]]
    assert await matching(Compare("item.meta.role", "=", "assistant")) == [ids[1]]
    assert await matching(Compare("item.meta.role", "!=", "user")) == [ids[1], ids[2]]
    assert await matching(Not(Compare("item.tags", "=", "y"))) == [ids[2]]


async def test_term_rows_counts_rows_per_term(store: Store, scope: Scope) -> None:
    await store.write(
        lambda tx: tx.items.add([chunk(scope, "a", "alpha beta"), chunk(scope, "b", "alpha")])
    )
    assert await store.read(lambda tx: tx.lexical.term_rows(["alpha", "beta", "gamma"])) == {
        "alpha": 2,
        "beta": 1,
        "gamma": 0,
    }


async def test_term_frequencies_and_lengths_see_only_the_scope(store: Store, scope: Scope) -> None:
    other = Scope.of("another-project")
    ids = await store.write(
        lambda tx: tx.items.add(
            [
                chunk(scope, "a", "retry the retries then retry", tags=("retry",)),
                chunk(scope, "b", "backoff only"),
                chunk(other, "c", "retry retry retry retry backoff backoff"),
            ]
        )
    )
    found = await store.read(
        lambda tx: tx.lexical.term_frequencies(["retry", "backoff", "gamma", " "], scope)
    )
    # Stemmed as the index is: "retries" counts; the tag is part of the document.
    assert found == {"retry": {ids[0]: 4}, "backoff": {ids[1]: 1}, "gamma": {}}
    lengths = await store.read(lambda tx: tx.lexical.lengths(scope))
    assert lengths == {ids[0]: 6, ids[1]: 2}
    assert await store.read(lambda tx: tx.lexical.lengths(scope, kinds=("memory",))) == {}


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(terms=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4))
async def test_any_terms_are_a_safe_query(store: Store, scope: Scope, terms: list[str]) -> None:
    # Quotes, FTS operators, NUL-free unicode: never an error, never a match of everything.
    terms = [t.replace("\x00", "") or "x" for t in terms]
    for operator in ("AND", "OR"):
        hits = await store.read(
            lambda tx, o=operator: tx.lexical.search(LexicalQuery(tuple(terms), o), scope)
        )  # type: ignore[misc]
        assert hits == []


async def test_vector_search_orders_by_similarity_within_scope_and_kinds(
    store: Store, scope: Scope, other_scope: Scope
) -> None:
    vectors = unit_vectors(6)
    rows = [chunk(scope, f"c{i}", f"t{i}") for i in range(4)]
    rows.append(NewItem(uid="m", kind="memory", text="m", token_count=1, scope=scope))
    rows.append(chunk(other_scope, "o", "o"))
    ids = await store.write(lambda tx: tx.items.add(rows, vectors))
    query = vectors[2]
    found = await store.read(lambda tx: tx.vectors.search(query, scope, kinds=["chunk"], k=3))
    assert found.hits[0].item_id == ids[2] and found.hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert len(found.hits) == 3 and set(h.item_id for h in found.hits) <= set(ids[:4])
    expected = sorted(range(4), key=lambda i: -float(vectors[i] @ query))[:3]
    assert [h.item_id for h in found.hits] == [ids[i] for i in expected]


async def test_a_selective_filter_never_starves_the_vector_arm(store: Store, scope: Scope) -> None:
    vectors = unit_vectors(400, seed=3)
    rows = [chunk(scope, f"c{i}", "x", tags=("rare",) if i in (7, 311) else ()) for i in range(400)]
    ids = await store.write(lambda tx: tx.items.add(rows, vectors))
    found = await store.read(
        lambda tx: tx.vectors.search(
            vectors[0], scope, where=Compare("item.tags", "=", "rare"), k=5
        )
    )
    assert sorted(h.item_id for h in found.hits) == sorted([ids[7], ids[311]])
    via_store = await store.vector_search(
        vectors[0], scope, where=Compare("item.tags", "=", "rare"), k=5
    )
    assert sorted(h.item_id for h in via_store.hits) == sorted([ids[7], ids[311]])


async def test_store_paths_agree_with_the_index_and_never_serve_stale_vectors(
    store: Store, scope: Scope
) -> None:
    vectors = unit_vectors(50, seed=5)
    ids = await store.write(
        lambda tx: tx.items.add([chunk(scope, f"c{i}", "x") for i in range(50)], vectors)
    )
    await store.prepare_vectors(scope, ["chunk"])
    direct = await store.read(lambda tx: tx.vectors.search(vectors[9], scope, kinds=["chunk"], k=5))
    fast = await store.vector_search(vectors[9], scope, kinds=["chunk"], k=5)
    assert [h.item_id for h in fast.hits] == [h.item_id for h in direct.hits]
    sims = await store.similarities(vectors[9], ids[:3], scope=scope, kinds=["chunk"])
    assert sims == pytest.approx(
        {i: float(vectors[n] @ vectors[9]) for n, i in enumerate(ids[:3])}, abs=1e-5
    )
    # A delete after the store prepared its fast path: the deleted item is never returned.
    await store.write(lambda tx: tx.items.delete([ids[9]]))
    after = await store.vector_search(vectors[9], scope, kinds=["chunk"], k=5)
    assert ids[9] not in [h.item_id for h in after.hits]
    assert ids[9] not in await store.similarities(
        vectors[9], [ids[9]], scope=scope, kinds=["chunk"]
    )


async def test_vectors_load_count_and_stamp(store: Store, scope: Scope, other_scope: Scope) -> None:
    before = await store.read(lambda tx: tx.vectors.stamp())
    ids = await store.write(
        lambda tx: tx.items.add(
            [chunk(scope, "a", "x"), chunk(other_scope, "b", "y")], unit_vectors(2)
        )
    )
    assert await store.read(lambda tx: tx.vectors.stamp()) != before
    loaded_ids, matrix = await store.read(lambda tx: tx.vectors.load(scope, ["chunk"]))
    assert loaded_ids.tolist() == [ids[0]] and matrix.shape == (1, 8) and matrix.dtype == np.float32
    assert await store.read(lambda tx: (tx.vectors.count(scope), tx.vectors.count())) == (1, 2)
    assert await store.read(lambda tx: tx.vectors.dimension) == 8
