"""The HierarchyStore contract, identically on SQLite, PostgreSQL and MySQL/MariaDB.

Every test runs once per backend (see ``conftest_backends``) in its own scope. The rules come
from the memoirAI spec, Requirement 3, and the store protocol in ``memory_core.hierarchy.store``.
"""

from __future__ import annotations

import random
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.errors import CategoryMissingError, InvalidInputError
from memory_core.hierarchy.store import Category, HierarchyStore, NewChunk, normalise_category_name
from memory_core.models import content_hash, stable_id
from memory_core.scope import Scope

try:  # tests/hierarchy is on sys.path when it has no __init__.py (pytest's rootdir-less mode)
    from conftest_backends import (
        BACKENDS,
        StoreFactory,
        anyio_backend,
        hierarchy_store_factory,
        other_scope,
        scope,
    )
except ImportError:  # pragma: no cover - tests/hierarchy became a package
    from hierarchy.conftest_backends import (  # type: ignore[no-redef]
        BACKENDS,
        StoreFactory,
        anyio_backend,
        hierarchy_store_factory,
        other_scope,
        scope,
    )

__all__ = ["anyio_backend", "hierarchy_store_factory", "scope"]  # fixtures used by name

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize("hierarchy_store_factory", BACKENDS, indirect=True),
]

# Text a careless store would execute or mangle: quotes, comments, placeholders of every
# driver's paramstyle, backslashes, LIKE wildcards, non-ASCII and astral characters.
NASTY = [
    "Robert'); DROP TABLE memoir_category;--",
    '"; DELETE FROM item; --',
    "%s %(name)s ? $1 :name {0}",
    "back\\slash \\' \\\" \\n",
    "100% _wild_ [card]",
    "Ünïcödé ∑ 漢字 🚀",
    'O\'Reilly "quoted" `ticked`',
]


def _chunk(scope: Scope, key: object, *, created_at: str, text: str | None = None) -> NewChunk:
    body = text if text is not None else f"chunk {key} of {scope}"
    return NewChunk(
        uid=stable_id(scope, key),
        text=body,
        token_count=len(body.split()),
        content_hash=content_hash(body),
        created_at=created_at,
    )


def _ts(second: int, micro: int = 0) -> str:
    return f"2025-01-01T00:00:{second:02d}.{micro:06d}+00:00"


async def _leaf(store: HierarchyStore, scope: Scope, *names: str) -> Category:
    """Create the path ``names`` (one per level) and return its last category."""
    parent: Category | None = None
    for level, name in enumerate(names, start=1):
        parent = await store.create_category(
            scope, parent_id=None if parent is None else parent.category_id, level=level, name=name
        )
    assert parent is not None
    return parent


# -- tables ------------------------------------------------------------------------------


async def test_open_is_idempotent_and_a_second_store_sees_the_same_rows(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    first = await hierarchy_store_factory()
    await first.open()  # opening again creates nothing new and fails on nothing
    created = await first.create_category(scope, parent_id=None, level=1, name="Physics")
    second = await hierarchy_store_factory()
    assert [c.category_id for c in await second.all_categories(scope)] == [created.category_id]
    assert second.backend in {"sqlite", "postgresql", "mysql"}


# -- levels and parents ------------------------------------------------------------------


async def test_level_one_categories_have_no_parent(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory()
    root = await store.create_category(scope, parent_id=None, level=1, name="Science")
    assert root.parent_id is None and root.level == 1 and root.scope == scope.key
    with pytest.raises(InvalidInputError, match="level-1"):
        await store.create_category(scope, parent_id=root.category_id, level=1, name="Arts")


async def test_deeper_levels_need_a_parent_exactly_one_level_up(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=3)
    root = await store.create_category(scope, parent_id=None, level=1, name="Science")
    child = await store.create_category(scope, parent_id=root.category_id, level=2, name="Physics")
    assert (child.parent_id, child.level) == (root.category_id, 2)
    with pytest.raises(InvalidInputError):  # no parent
        await store.create_category(scope, parent_id=None, level=2, name="Chemistry")
    with pytest.raises(InvalidInputError):  # parent two levels up
        await store.create_category(scope, parent_id=root.category_id, level=3, name="Optics")
    with pytest.raises(InvalidInputError):  # parent that does not exist
        await store.create_category(scope, parent_id=10**12, level=2, name="Biology")
    assert await store.count_categories(scope) == 2


async def test_a_parent_from_another_scope_is_refused(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory()
    elsewhere = other_scope(hierarchy_store_factory)
    foreign = await store.create_category(elsewhere, parent_id=None, level=1, name="Science")
    with pytest.raises(InvalidInputError):
        await store.create_category(scope, parent_id=foreign.category_id, level=2, name="Physics")
    assert await store.count_categories(scope) == 0


@pytest.mark.parametrize("level", [0, 4, 101])
async def test_levels_outside_the_configured_depth_are_refused(
    hierarchy_store_factory: StoreFactory, scope: Scope, level: int
) -> None:
    store = await hierarchy_store_factory(depth=3)
    with pytest.raises(InvalidInputError, match="depth"):
        await store.create_category(scope, parent_id=None, level=level, name="Anything")


@pytest.mark.parametrize("depth", [0, 101])
async def test_a_depth_outside_1_to_100_is_refused(
    hierarchy_store_factory: StoreFactory, depth: int
) -> None:
    with pytest.raises(InvalidInputError, match="depth"):
        await hierarchy_store_factory(depth=depth)


async def test_a_hundred_levels_deep_path_can_be_built(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=100)
    leaf = await _leaf(store, scope, *(f"level {n}" for n in range(1, 101)))
    assert leaf.level == 100
    [chunk_id] = await store.add_chunks(
        scope, leaf.category_id, [_chunk(scope, "deep", created_at=_ts(1))]
    )
    assert [c.chunk_id for c in await store.chunks_in_category(scope, leaf.category_id)] == [
        chunk_id
    ]


# -- names -------------------------------------------------------------------------------


async def test_names_differing_only_in_case_and_spaces_are_one_category(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory()
    first = await store.create_category(scope, parent_id=None, level=1, name="Databases")
    for twin in ("databases ", "  DATABASES", "DataBases", "dataBASES\n"):
        again = await store.create_category(scope, parent_id=None, level=1, name=twin)
        assert again.category_id == first.category_id
        assert again.name == "Databases"  # the first spelling is kept
    assert await store.count_categories(scope) == 1


async def test_inner_whitespace_is_folded_in_the_stored_name(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory()
    made = await store.create_category(
        scope, parent_id=None, level=1, name="  Machine \n Learning "
    )
    twin = await store.create_category(scope, parent_id=None, level=1, name="machine learning")
    assert made.name == "Machine Learning"
    assert twin.category_id == made.category_id


async def test_same_name_under_different_parents_or_scopes_is_distinct(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory()
    science = await store.create_category(scope, parent_id=None, level=1, name="Science")
    arts = await store.create_category(scope, parent_id=None, level=1, name="Arts")
    a = await store.create_category(scope, parent_id=science.category_id, level=2, name="History")
    b = await store.create_category(scope, parent_id=arts.category_id, level=2, name="History")
    assert a.category_id != b.category_id
    elsewhere = other_scope(hierarchy_store_factory)
    c = await store.create_category(elsewhere, parent_id=None, level=1, name="Science")
    assert c.category_id != science.category_id
    assert await store.count_categories(scope) == 4
    assert await store.count_categories(elsewhere) == 1


@pytest.mark.parametrize("name", ["", "   ", "\n\t", "x" * 201])
async def test_blank_or_overlong_names_are_refused(
    hierarchy_store_factory: StoreFactory, scope: Scope, name: str
) -> None:
    store = await hierarchy_store_factory()
    with pytest.raises(InvalidInputError):
        await store.create_category(scope, parent_id=None, level=1, name=name)
    assert await store.count_categories(scope) == 0


async def test_sql_looking_names_round_trip_unchanged(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=2)
    root = await store.create_category(scope, parent_id=None, level=1, name="Root")
    made = {
        name: await store.create_category(scope, parent_id=root.category_id, level=2, name=name)
        for name in NASTY
    }
    children = await store.categories(scope, parent_id=root.category_id)
    assert {c.name for c in children} == set(NASTY)
    for name, category in made.items():
        again = await store.create_category(scope, parent_id=root.category_id, level=2, name=name)
        assert again.category_id == category.category_id
    assert await store.count_categories(scope) == 1 + len(NASTY)


# -- listing -----------------------------------------------------------------------------


async def test_children_are_listed_by_normalised_name_within_their_scope(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory()
    names = ["banana", "Apple", "cherry", "apricot", "Zebra", "éclair", "Ähre"]
    for name in random.Random(7).sample(names, len(names)):
        await store.create_category(scope, parent_id=None, level=1, name=name)
    await store.create_category(
        other_scope(hierarchy_store_factory), parent_id=None, level=1, name="Aardvark"
    )
    roots = await store.categories(scope, parent_id=None)
    # Code-point order of the casefolded name: the same on every backend, whatever the locale.
    assert [c.name for c in roots] == sorted(names, key=str.casefold)
    assert all(c.level == 1 and c.parent_id is None for c in roots)


async def test_categories_lists_only_the_children_of_the_given_parent(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory()
    science = await store.create_category(scope, parent_id=None, level=1, name="Science")
    arts = await store.create_category(scope, parent_id=None, level=1, name="Arts")
    for name in ("Physics", "Chemistry"):
        await store.create_category(scope, parent_id=science.category_id, level=2, name=name)
    await store.create_category(scope, parent_id=arts.category_id, level=2, name="Music")
    kids = await store.categories(scope, parent_id=science.category_id)
    assert [c.name for c in kids] == ["Chemistry", "Physics"]
    assert [
        c.name for c in await store.categories(scope, parent_id=science.category_id, level=2)
    ] == [
        "Chemistry",
        "Physics",
    ]
    assert await store.categories(scope, parent_id=science.category_id, level=3) == []
    assert [c.name for c in await store.categories(scope, parent_id=None)] == ["Arts", "Science"]


async def test_all_categories_and_the_global_count_cover_every_level(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=3)
    await _leaf(store, scope, "A", "B", "C")
    await _leaf(store, scope, "A", "B", "D")
    await _leaf(store, scope, "E", "F", "G")
    every = await store.all_categories(scope)
    assert [c.level for c in every] == sorted(c.level for c in every)
    assert {c.name for c in every} == set("ABCDEFG")
    # The cap of Requirement 2 is global across levels: 7 categories, however deep.
    assert await store.count_categories(scope) == len(every) == 7


# -- chunks ------------------------------------------------------------------------------


async def test_chunks_link_only_to_leaf_categories(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=3)
    leaf = await _leaf(store, scope, "Science", "Physics", "Optics")
    assert leaf.parent_id is not None
    chunk = _chunk(scope, 1, created_at=_ts(1))
    with pytest.raises(InvalidInputError, match="leaf"):
        await store.add_chunks(scope, leaf.parent_id, [chunk])
    with pytest.raises(CategoryMissingError, match="file the chunks again"):
        await store.add_chunks(scope, 10**12, [chunk])  # ingest refiles against the tree
    with pytest.raises(InvalidInputError):  # a leaf, but of another scope
        await store.add_chunks(other_scope(hierarchy_store_factory), leaf.category_id, [chunk])
    assert await store.add_chunks(scope, leaf.category_id, [chunk])


async def test_with_depth_one_the_level_one_categories_are_the_leaves(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=1)
    leaf = await store.create_category(scope, parent_id=None, level=1, name="Everything")
    ids = await store.add_chunks(scope, leaf.category_id, [_chunk(scope, 1, created_at=_ts(1))])
    assert len(ids) == 1
    with pytest.raises(InvalidInputError):
        await store.create_category(scope, parent_id=leaf.category_id, level=2, name="More")


async def test_chunks_round_trip_with_their_counts_hashes_and_times(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=2)
    leaf = await _leaf(store, scope, "Docs", "Text")
    chunks = [
        _chunk(scope, i, created_at=_ts(i), text=text)
        for i, text in enumerate([*NASTY, "line\n\nbreaks\r\n"])
    ]
    ids = await store.add_chunks(scope, leaf.category_id, chunks)
    assert len(set(ids)) == len(chunks)
    read = await store.chunks_in_category(scope, leaf.category_id, limit=100)
    assert [(c.uid, c.text, c.token_count, c.content_hash, c.created_at) for c in read] == [
        (c.uid, c.text, c.token_count, c.content_hash, c.created_at) for c in chunks
    ]
    assert [c.chunk_id for c in read] == ids
    assert {c.category_id for c in read} == {leaf.category_id}


async def test_adding_the_same_chunks_again_changes_nothing(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=2)
    leaf = await _leaf(store, scope, "Docs", "Text")
    chunks = [_chunk(scope, i, created_at=_ts(i)) for i in range(5)]
    first = await store.add_chunks(scope, leaf.category_id, chunks)
    edited = [_chunk(scope, 2, created_at=_ts(2), text="a different text, same uid")]
    again = await store.add_chunks(scope, leaf.category_id, [*reversed(chunks), *edited])
    assert again == [*reversed(first), first[2]]
    read = await store.chunks_in_category(scope, leaf.category_id)
    assert [c.chunk_id for c in read] == first
    assert read[2].text == chunks[2].text  # the stored chunk is left as it is


async def test_a_batch_with_a_repeated_uid_stores_it_once(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=1)
    leaf = await store.create_category(scope, parent_id=None, level=1, name="Docs")
    one = _chunk(scope, "same", created_at=_ts(1))
    ids = await store.add_chunks(scope, leaf.category_id, [one, one])
    assert ids[0] == ids[1]
    assert len(await store.chunks_in_category(scope, leaf.category_id)) == 1


async def test_an_empty_batch_is_a_no_op(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=1)
    leaf = await store.create_category(scope, parent_id=None, level=1, name="Docs")
    assert await store.add_chunks(scope, leaf.category_id, []) == []


async def test_vectors_are_accepted_one_per_chunk(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=1)
    leaf = await store.create_category(scope, parent_id=None, level=1, name="Docs")
    chunks = [_chunk(scope, i, created_at=_ts(i)) for i in range(3)]
    vectors = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = await store.add_chunks(scope, leaf.category_id, chunks, vectors)
    assert len(ids) == 3
    with pytest.raises(InvalidInputError):
        await store.add_chunks(
            scope, leaf.category_id, [_chunk(scope, 9, created_at=_ts(9))], vectors
        )


# -- order and pagination ----------------------------------------------------------------


async def test_chunks_come_back_by_created_at_then_uid(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=1)
    leaf = await store.create_category(scope, parent_id=None, level=1, name="Docs")
    # Several chunks share a timestamp (one ingest batch), so the uid must break the tie.
    chunks = [_chunk(scope, i, created_at=_ts(i % 4, micro=i % 2)) for i in range(24)]
    shuffled = random.Random(3).sample(chunks, len(chunks))
    for start in range(0, len(shuffled), 5):
        await store.add_chunks(scope, leaf.category_id, shuffled[start : start + 5])
    read = await store.chunks_in_category(scope, leaf.category_id, limit=1000)
    expected = sorted(chunks, key=lambda c: (c.created_at, c.uid))
    assert [c.uid for c in read] == [c.uid for c in expected]


@pytest.mark.parametrize("page", [1, 2, 3, 7, 50])
async def test_keyset_pages_read_every_chunk_once_in_order(
    hierarchy_store_factory: StoreFactory, scope: Scope, page: int
) -> None:
    store = await hierarchy_store_factory(depth=1)
    leaf = await store.create_category(scope, parent_id=None, level=1, name="Docs")
    chunks = [_chunk(scope, i, created_at=_ts(i // 3)) for i in range(17)]
    await store.add_chunks(scope, leaf.category_id, chunks)
    seen: list[str] = []
    after: tuple[str, str] | None = None
    while True:
        batch = await store.chunks_in_category(scope, leaf.category_id, after=after, limit=page)
        assert len(batch) <= page
        if not batch:
            break
        seen += [c.uid for c in batch]
        after = (batch[-1].created_at, batch[-1].uid)
    assert seen == [c.uid for c in sorted(chunks, key=lambda c: (c.created_at, c.uid))]


async def test_chunks_of_other_categories_and_scopes_stay_out(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory(depth=1)
    mine = await store.create_category(scope, parent_id=None, level=1, name="Mine")
    theirs = await store.create_category(scope, parent_id=None, level=1, name="Theirs")
    await store.add_chunks(scope, mine.category_id, [_chunk(scope, 1, created_at=_ts(1))])
    await store.add_chunks(scope, theirs.category_id, [_chunk(scope, 2, created_at=_ts(1))])
    assert [c.uid for c in await store.chunks_in_category(scope, mine.category_id)] == [
        stable_id(scope, 1)
    ]
    assert (
        await store.chunks_in_category(other_scope(hierarchy_store_factory), mine.category_id) == []
    )


# -- concurrency ---------------------------------------------------------------------------


async def test_concurrent_creators_of_one_name_get_one_category(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    stores = [await hierarchy_store_factory() for _ in range(2)]
    results: list[Category] = []

    async def create(store: HierarchyStore, spelling: str) -> None:
        results.append(await store.create_category(scope, parent_id=None, level=1, name=spelling))

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(create, stores[n % 2], "Databases" if n % 2 else " databases")
    assert len({c.category_id for c in results}) == 1
    assert await stores[0].count_categories(scope) == 1


# -- runs --------------------------------------------------------------------------------


async def test_runs_are_recorded_and_listed_newest_first(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store = await hierarchy_store_factory()
    payload = {
        "strategy": "wide_branch",
        "explored_paths": [["Science", "Physics", "Optics"]],
        "dropped_paths": [],
        "confidences": {"Science": 0.9},
        "budget": 4000,
        "note": NASTY[0] + " " + NASTY[5],
    }
    first = await store.record_run(scope, "hierarchy_query", 12.5, payload)
    second = await store.record_run(scope, "hierarchy_ingest", 3.0, {"chunks": 2})
    third = await store.record_run(scope, "hierarchy_query", 7.25, {"n": 3})
    assert first < second < third
    runs = await store.list_runs(scope)
    assert [r["run_id"] for r in runs] == [third, second, first]
    assert runs[2]["payload"] == payload
    assert runs[2]["took_ms"] == pytest.approx(12.5)
    assert runs[2]["kind"] == "hierarchy_query" and runs[2]["scope"] == scope.key
    assert runs[2]["started_at"] <= runs[0]["started_at"]
    queries = await store.list_runs(scope, kind="hierarchy_query")
    assert [r["run_id"] for r in queries] == [third, first]
    assert [r["run_id"] for r in await store.list_runs(scope, limit=1)] == [third]
    assert await store.list_runs(other_scope(hierarchy_store_factory)) == []


# -- helpers the service uses (beyond the protocol; every backend has them) ----------------


async def test_existing_chunks_maps_stored_uids_to_chunk_and_category(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store: Any = await hierarchy_store_factory(depth=1)
    leaf = await store.create_category(scope, parent_id=None, level=1, name="Docs")
    chunks = [_chunk(scope, i, created_at=_ts(i)) for i in range(3)]
    ids = await store.add_chunks(scope, leaf.category_id, chunks)
    missing = stable_id(scope, "never stored")
    found = await store.existing_chunks(scope, [chunks[2].uid, missing, chunks[0].uid])
    assert found == {
        chunks[0].uid: (ids[0], leaf.category_id),
        chunks[2].uid: (ids[2], leaf.category_id),
    }
    assert await store.existing_chunks(other_scope(hierarchy_store_factory), [chunks[0].uid]) == {}
    assert await store.existing_chunks(scope, []) == {}


async def test_chunk_counts_are_per_leaf_category(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    store: Any = await hierarchy_store_factory(depth=2)
    a = await _leaf(store, scope, "Top", "A")
    b = await _leaf(store, scope, "Top", "B")
    await store.add_chunks(
        scope, a.category_id, [_chunk(scope, i, created_at=_ts(i)) for i in range(3)]
    )
    await store.add_chunks(scope, b.category_id, [_chunk(scope, 9, created_at=_ts(9))])
    assert await store.chunk_counts(scope) == {a.category_id: 3, b.category_id: 1}
    assert await store.chunk_counts(other_scope(hierarchy_store_factory)) == {}


# -- properties ----------------------------------------------------------------------------

_ANY_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_NAMES = st.text(_ANY_TEXT, min_size=1, max_size=30).filter(
    lambda name: bool(normalise_category_name(name))
)
_SPELLINGS = st.sampled_from([str.upper, str.lower, str.title, lambda s: f"  {s}\t", lambda s: s])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(names=st.lists(_NAMES, min_size=1, max_size=5), spell=_SPELLINGS, text=st.text(_ANY_TEXT))
async def test_any_name_and_text_round_trip_and_twins_follow_the_normalised_name(
    hierarchy_store_factory: StoreFactory,
    names: list[str],
    spell: Any,
    text: str,
) -> None:
    # One store for every example (opening one per example would dominate the run time).
    cache: dict[str, Any] = hierarchy_store_factory.cache  # type: ignore[attr-defined]
    if "store" not in cache:
        cache["store"] = await hierarchy_store_factory(depth=1)
    store = cache["store"]
    scope = other_scope(hierarchy_store_factory)  # a fresh scope per example, cleaned up
    made = [await store.create_category(scope, parent_id=None, level=1, name=n) for n in names]
    for name, category in zip(names, made, strict=True):
        assert category.name == " ".join(name.split())  # stored exactly, whitespace folded
        twin = await store.create_category(scope, parent_id=None, level=1, name=spell(name))
        # The database must neither merge what the normalised names tell apart (collations
        # that fold accents or case differently) nor split what they call the same.
        if normalise_category_name(spell(name)) == normalise_category_name(name):
            assert twin.category_id == category.category_id
        else:
            assert twin.category_id != category.category_id
    distinct = {normalise_category_name(n) for n in names}
    assert len({c.category_id for c in made}) == len(distinct)
    leaf = made[0]
    chunk = _chunk(scope, "prop", created_at=_ts(1), text=text)
    await store.add_chunks(scope, leaf.category_id, [chunk])
    [read] = await store.chunks_in_category(scope, leaf.category_id)
    assert read.text == text


async def test_concurrent_writers_of_the_same_chunks_store_each_once(
    hierarchy_store_factory: StoreFactory, scope: Scope
) -> None:
    stores = [await hierarchy_store_factory(depth=1) for _ in range(2)]
    leaf = await stores[0].create_category(scope, parent_id=None, level=1, name="Docs")
    chunks = [_chunk(scope, i, created_at=_ts(i)) for i in range(40)]
    results: list[dict[str, int]] = []

    async def write(store: HierarchyStore, batch: list[NewChunk]) -> None:
        ids = await store.add_chunks(scope, leaf.category_id, batch)
        results.append(dict(zip([c.uid for c in batch], ids, strict=True)))

    async with anyio.create_task_group() as tg:
        for n in range(6):  # two connections, overlapping batches in opposite orders
            batch = chunks if n % 2 else list(reversed(chunks))
            tg.start_soon(write, stores[n % 2], batch)
    read = await stores[1].chunks_in_category(scope, leaf.category_id, limit=1000)
    assert [c.uid for c in read] == [c.uid for c in chunks]
    expected = {c.uid: c.chunk_id for c in read}
    assert len(results) == 6
    assert all(ids == expected for ids in results)  # every writer got the stored ids


async def test_a_scope_that_looks_like_sql_is_just_a_value(
    hierarchy_store_factory: StoreFactory,
) -> None:
    store = await hierarchy_store_factory(depth=1)
    nasty_scope = Scope.of(
        other_scope(hierarchy_store_factory).key + "'; DROP TABLE memoir_chunk; --\\%_"
    )
    hierarchy_store_factory.scopes.add(nasty_scope)  # type: ignore[attr-defined]
    leaf = await store.create_category(nasty_scope, parent_id=None, level=1, name="Docs")
    assert leaf.scope == nasty_scope.key
    await store.add_chunks(
        nasty_scope, leaf.category_id, [_chunk(nasty_scope, 1, created_at=_ts(1))]
    )
    assert [c.scope for c in await store.all_categories(nasty_scope)] == [nasty_scope.key]
    assert len(await store.chunks_in_category(nasty_scope, leaf.category_id)) == 1
    await store.record_run(nasty_scope, "q", 1.0, {})
    assert [r["scope"] for r in await store.list_runs(nasty_scope)] == [nasty_scope.key]
