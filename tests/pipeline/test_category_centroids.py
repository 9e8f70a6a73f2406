"""Running category centroids (issue 12): a memorize refreshes the categories it touched from
their stored centroid sums, without reading their members, and ends where a full recompute
from the members would (sums within 1e-5, the same anchors), on every backend."""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_core.errors import SchemaError
from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer import MemberRow, ScopeValues
from memory_core.storage.layer.memory import InMemoryLayerStore
from memory_core.storage.layer.sqlite import SqliteLayerStore
from tests.pipeline.layer_kit import ALICE, CATEGORIES, OrgScope

KEYS = [c["key"] for c in CATEGORIES]
_SUBJECTS = {
    "preferences": ["dark roast coffee", "green tea", "vim keybindings", "tabs over spaces"],
    "work": ["the billing migration", "the legacy API", "the release branch", "the repository"],
    "health": ["peanut allergy", "morning exercise", "eight hours of sleep", "the doctor visit"],
}
_FRAMES = ["I prefer {} every day.", "We must finish {} by Friday.", "Remember {} for the team.",
           "My note about {} number {}.", "Please keep {} in mind, case {}."]  # fmt: skip


def _counting(base: type) -> type:
    """A real store class that also records which categories' members were read."""

    class Counting(base):  # type: ignore[valid-type,misc]
        member_reads: list[list[str]]

        def category_members(self, scope: ScopeValues, keys: Sequence[str]) -> list[MemberRow]:
            self.member_reads.append(list(keys))
            return list(super().category_members(scope, keys))

    return Counting


@pytest.fixture
def counting_service(
    backend: str, layer_location: dict[str, Any], tmp_path: Path
) -> Iterator[MemoryService]:
    store: Any
    if backend == "memory":
        store = _counting(InMemoryLayerStore)()
    elif backend == "sqlite":
        store = _counting(SqliteLayerStore)(layer_location["path"])
    else:
        from memory_core.storage.layer.postgres import PostgresLayerStore

        store = _counting(PostgresLayerStore)(layer_location["url"])
    store.member_reads = []
    service = MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": store},
        boundary_fields=["org_id"],
        embedder="hash:256",
        allowed_roots=[tmp_path],
    )
    yield service
    service.close()


def _chat(rng: random.Random, statements: int) -> list[dict[str, str]]:
    lines = []
    for _ in range(statements):
        subject = rng.choice(rng.choice(list(_SUBJECTS.values())))
        lines.append(rng.choice(_FRAMES).format(subject, rng.randrange(1000)))
    return [{"role": "user", "content": " ".join(lines)}]


def _full_recompute(members: Sequence[MemberRow], anchors: int = 3) -> tuple[Any, list[str]]:
    """The centroid and anchors as the pre-issue-12 refresh computed them from all members."""
    with_vec = [m for m in members if m.embedding is not None]
    if not with_vec:
        ordered = sorted(members, key=lambda m: (-m.confidence, m.item_id))
        return None, [m.item_id for m in ordered[:anchors]]
    centroid = np.mean([np.asarray(m.embedding, np.float64) for m in with_vec], axis=0)

    def score(m: MemberRow) -> float:
        return float(np.asarray(m.embedding, np.float64) @ centroid) * m.confidence

    ordered = sorted(with_vec, key=lambda m: (-score(m), m.item_id))
    return centroid, [m.item_id for m in ordered[:anchors]]


def _assert_matches_full_recompute(
    service: MemoryService, refreshed: Sequence[str] | None = None
) -> None:
    """Every category's stored sums match its members; the anchors and counts of those
    refreshed since the last write (all by default) are what a full recompute picks."""
    store = service.store
    sums = store.category_sums(ALICE, KEYS)
    rows = {
        c.category_key: c for c in store.categories({"org_id": ("acme",), "user_id": ("alice",)})
    }
    for key in KEYS:
        members = [m for m in store.category_members(ALICE, [key])]
        centroid, anchors = _full_recompute(members)
        stored = sums.get(key)
        if not members:
            assert stored is None or stored.member_count == 0
            continue
        assert stored is not None and stored.member_count == len(members)
        if centroid is None:
            assert stored.centroid() is None
        else:
            assert stored.vector_count == sum(m.embedding is not None for m in members)
            np.testing.assert_allclose(stored.centroid(), centroid, atol=1e-5)
        if refreshed is None or key in refreshed:
            assert rows[key].anchor_ids == anchors, key
            assert rows[key].item_count == len(members)


def test_stored_centroids_and_anchors_equal_a_full_recompute_after_memorize_merge_forget(
    counting_service: MemoryService,
) -> None:
    service = counting_service
    rng = random.Random(12)
    for _ in range(12):
        service.memorize(ALICE, conversation=_chat(rng, 6))
        _assert_matches_full_recompute(service)
    # merge: the same statements again, in a new resource
    items = service.store.items({"org_id": ("acme",), "user_id": ("alice",)})
    again = " ".join(i.text for i in items[:5])
    merged = service.memorize(ALICE, conversation=[{"role": "user", "content": again}])
    assert merged.items_merged
    _assert_matches_full_recompute(service)
    # forget: items leave their categories through the store's own write path
    gone = items[5:9]
    for row in gone:
        row.status = "forgotten"
    service.store.upsert_items(gone)
    _assert_matches_full_recompute(service, refreshed=[])
    assert {g.category_key for g in gone} & set(KEYS)
    # (a category the next memorize does not touch keeps its anchors: as before issue 12)
    after = service.memorize(ALICE, conversation=_chat(rng, 6))
    _assert_matches_full_recompute(service, refreshed=after.categories)
    # evolve recomputes from the members (supersedes, re-categorises) and resets the sums
    service.evolve(ALICE)
    _assert_matches_full_recompute(service)
    for _ in range(4):
        service.memorize(ALICE, conversation=_chat(rng, 6))
        _assert_matches_full_recompute(service)


def test_a_memorize_does_not_read_the_members_of_the_categories_it_touches(
    counting_service: MemoryService,
) -> None:
    service = counting_service
    store: Any = service.store
    rng = random.Random(7)
    for _ in range(30):  # ~350 items, ~115 per category
        service.memorize(ALICE, conversation=_chat(rng, 30))
    items = service.store.items({"org_id": ("acme",), "user_id": ("alice",)})
    store.member_reads.clear()
    # a merge moves no centroid: the previous anchors and the merged item decide, exactly
    result = service.memorize(ALICE, conversation=[{"role": "user", "content": items[3].text}])
    assert result.items_merged == [items[3].item_id]
    assert store.member_reads == []
    # new items: over a run of memorizes most refreshes stay incremental (a full read happens
    # only where the bound cannot prove the incremental anchors equal the full recompute's)
    touched = 0
    for _ in range(20):
        touched += len(service.memorize(ALICE, conversation=_chat(rng, 3)).categories)
    read = sum(len(keys) for keys in store.member_reads)
    assert touched >= 30 and read * 4 < touched, (read, touched)
    _assert_matches_full_recompute(service)


def test_a_store_from_before_the_sums_is_refused_in_validate_mode_and_upgraded_in_create_mode(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"

    def open_service(mode: str) -> MemoryService:
        return MemoryService.create(
            scope_model=OrgScope,
            categories=CATEGORIES,
            storage_providers={"metadata_store": {"provider": "sqlite", "path": str(path)}},
            boundary_fields=["org_id"],
            embedder="hash:256",
            allowed_roots=[tmp_path],
            ddl_mode=mode,
        )

    service = open_service("create")
    rng = random.Random(3)
    for _ in range(4):
        service.memorize(ALICE, conversation=_chat(rng, 6))
    service.close()
    with sqlite3.connect(path) as conn:  # what a ddl_version 1 store looks like
        conn.execute("DROP TABLE layer_category_sum")
    with pytest.raises(SchemaError, match="centroid sums") as refused:
        open_service("validate")
    assert "ddl_mode='create'" in (refused.value.hint or "")
    service = open_service("create")
    try:
        sums = service.store.category_sums(ALICE, KEYS)
        for key in KEYS:
            members = service.store.category_members(ALICE, [key])
            if members:
                centroid, _ = _full_recompute(members)
                np.testing.assert_allclose(sums[key].centroid(), centroid, atol=1e-5)
                assert sums[key].member_count == len(members)
        service.memorize(ALICE, conversation=_chat(rng, 6))
        _assert_matches_full_recompute(service)
    finally:
        service.close()


def test_two_services_memorizing_one_scope_at_once_keep_the_sums_equal_to_the_members(
    backend: str, make_service: Any
) -> None:
    first, second = make_service(), make_service()  # two connections to one store
    errors: list[BaseException] = []

    def memorize_many(service: MemoryService, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(6):
                service.memorize(ALICE, conversation=_chat(rng, 6))
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [
        threading.Thread(target=memorize_many, args=(first, 1)),
        threading.Thread(target=memorize_many, args=(second, 2)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    _assert_matches_full_recompute(first)
