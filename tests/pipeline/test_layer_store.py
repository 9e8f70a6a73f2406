"""The layer store port on every backend: scope filters, lexical quoting, vectors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.errors import DatabaseCorruptError, DatabaseUnavailableError
from memory_core.pipeline.extraction import query_terms
from memory_core.storage.layer import ItemRow, LayerStore, RunRow, open_layer_store
from memory_core.storage.layer.sqlite import SqliteLayerStore

FIELDS = ("org_id", "user_id")


@pytest.fixture
def store(layer_location: dict[str, Any]) -> Iterator[LayerStore]:
    made, _ = open_layer_store({"metadata_store": layer_location})
    made.provision(FIELDS, "create")
    rows = []
    for n, (org, user, text) in enumerate(
        [
            ("acme", "ann", 'tea "quoted" NEAR(x y) and col:umn * stars'),
            ("acme", "bob", "coffee with oat milk"),
            ("evil", "eve", "coffee beans and tea leaves"),
        ]
    ):
        vector = np.zeros(4, dtype=np.float32)
        vector[n] = 1.0
        rows.append(
            ItemRow(f"i{n}", {"org_id": org, "user_id": user}, "r", text, [], 0.5, "stable",
                    embedding=vector)
        )  # fmt: skip
    made.upsert_items(rows)
    yield made
    made.close()


def test_filters_select_exactly_their_scopes(store: LayerStore) -> None:
    assert {r.item_id for r in store.items({"org_id": ("acme",), "user_id": None})} == {"i0", "i1"}
    assert {r.item_id for r in store.items({"org_id": ("acme", "evil"), "user_id": ("eve",)})} == {
        "i2"
    }
    hits = store.lexical_search({"org_id": ("acme",), "user_id": None}, ["coffee"], 10)
    assert [h[0] for h in hits] == ["i1"]
    near = store.vector_search({"org_id": ("evil",), "user_id": None}, np.eye(4)[0], 5)
    assert [h[0] for h in near] == ["i2"]


def test_a_superseded_item_leaves_both_indexes(store: LayerStore) -> None:
    (row,) = store.items_by_id(["i1"])
    row.status = "superseded"
    store.upsert_items([row])
    everyone = {"org_id": ("acme", "evil"), "user_id": None}
    assert "i1" not in [h[0] for h in store.lexical_search(everyone, ["coffee"], 10)]
    assert "i1" not in [h[0] for h in store.vector_search(everyone, np.eye(4)[1], 10)]
    assert store.count_items(everyone) == 2


def test_items_can_be_read_by_category(store: LayerStore) -> None:
    rows = store.items_by_id(["i0", "i1"])
    rows[0].category_key, rows[1].category_key = "drinks", "food"
    store.upsert_items(rows)
    acme = {"org_id": ("acme",), "user_id": None}
    assert [r.item_id for r in store.items(acme, categories=["drinks"])] == ["i0"]
    assert {r.item_id for r in store.items(acme, categories=["drinks", "food"])} == {"i0", "i1"}
    assert store.items(acme, categories=[]) == []


def test_vector_search_sees_every_write_after_the_first_search(store: LayerStore) -> None:
    everyone = {"org_id": ("acme", "evil"), "user_id": None}
    acme = {"org_id": ("acme",), "user_id": None}
    store.vector_search(acme, np.eye(4)[3], 1)  # a backend may cache the matrix from here on
    added = ItemRow("i3", {"org_id": "acme", "user_id": "ann"}, "r", "new", [], 0.5, "stable",
                    embedding=np.eye(4, dtype=np.float32)[3])  # fmt: skip
    outside = ItemRow("i4", {"org_id": "evil", "user_id": "eve"}, "r", "x", [], 0.5, "stable",
                      embedding=np.eye(4, dtype=np.float32)[3])  # fmt: skip
    store.upsert_items([added, outside])
    assert [h[0] for h in store.vector_search(acme, np.eye(4)[3], 1)] == ["i3"]
    assert {h[0] for h in store.vector_search(everyone, np.eye(4)[3], 2)} == {"i3", "i4"}
    # a moved vector is found where it now points, a superseded one not at all
    (moved,) = store.items_by_id(["i3"])
    moved.embedding = np.eye(4, dtype=np.float32)[2]
    (gone,) = store.items_by_id(["i1"])
    gone.status = "superseded"
    store.upsert_items([moved, gone])
    hits = store.vector_search(acme, np.eye(4)[2], 3)
    assert hits[0][0] == "i3" and hits[0][1] == pytest.approx(1.0)
    assert "i1" not in [h[0] for h in hits]
    assert store.vector_search(acme, np.eye(4)[0], 3)[0][0] == "i0"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=60))
def test_any_query_text_is_safe_for_the_lexical_index(store: LayerStore, text: str) -> None:
    acme = {"org_id": ("acme",), "user_id": None}
    # raw words (quotes, NEAR, *, column filters) go to the backend as terms, never as syntax
    for terms in (query_terms(text), text.split(), [text]):
        hits = store.lexical_search(acme, terms, 5)
        assert all(h[0] in {"i0", "i1"} for h in hits)


def test_category_members_are_one_scopes_active_items_of_those_categories(
    store: LayerStore,
) -> None:
    rows = store.items_by_id(["i0", "i1", "i2"])
    for row, key in zip(rows, ["drinks", "drinks", "drinks"], strict=True):
        row.category_key = key
    store.upsert_items(rows)
    ann = {"org_id": "acme", "user_id": "ann"}
    (member,) = store.category_members(ann, ["drinks", "food"])
    assert (member.item_id, member.category_key, member.text) == ("i0", "drinks", rows[0].text)
    assert member.embedding is not None and member.embedding.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert store.category_members(ann, ["food"]) == []
    # moved to another category, then superseded: the index follows each write
    rows[0].category_key = "food"
    store.upsert_items([rows[0]])
    assert [m.item_id for m in store.category_members(ann, ["food"])] == ["i0"]
    assert store.category_members(ann, ["drinks"]) == []
    rows[0].status = "superseded"
    store.upsert_items([rows[0]])
    assert store.category_members(ann, ["food", "drinks"]) == []


def test_a_failed_atomic_block_leaves_nothing_on_a_transactional_store(
    store: LayerStore, backend: str
) -> None:
    acme = {"org_id": ("acme",), "user_id": None}
    store.vector_search(acme, np.eye(4)[3], 1)  # a cached matrix must not keep the write
    added = ItemRow("i9", {"org_id": "acme", "user_id": "ann"}, "r", "tea", [], 0.5, "stable",
                    embedding=np.eye(4, dtype=np.float32)[3])  # fmt: skip

    def work() -> None:
        store.upsert_items([added])
        assert store.items_by_id(["i9"])  # the block reads its own write
        raise RuntimeError("step failed after the write")

    with pytest.raises(RuntimeError, match="after the write"):
        store.atomically(work)
    if backend == "memory":
        return  # no transactions: one lock only (the write stays)
    assert store.items_by_id(["i9"]) == []
    assert "i9" not in [h[0] for h in store.vector_search(acme, np.eye(4)[3], 3)]
    store.atomically(lambda: store.upsert_items([added]))
    assert [h[0] for h in store.vector_search(acme, np.eye(4)[3], 1)] == ["i9"]


def test_many_vector_searches_answer_as_one_at_a_time(store: LayerStore) -> None:
    everyone = {"org_id": ("acme", "evil"), "user_id": None}
    queries = [np.eye(4)[0], np.eye(4)[2], np.ones(4) / 2]
    assert store.vector_search_many(everyone, queries, 2) == [
        store.vector_search(everyone, q, 2) for q in queries
    ]
    assert store.vector_search_many(everyone, [], 2) == []


def test_sqlite_matrix_follows_another_connections_write(tmp_path: Any) -> None:
    from memory_core.storage.layer.sqlite import SqliteLayerStore

    first, second = SqliteLayerStore(tmp_path / "l.db"), SqliteLayerStore(tmp_path / "l.db")
    first.provision(FIELDS, "create")
    second.provision(FIELDS, "validate")
    acme = {"org_id": ("acme",), "user_id": None}
    row = ItemRow("a", {"org_id": "acme", "user_id": "ann"}, "r", "x", [], 0.5, "stable",
                  embedding=np.eye(4, dtype=np.float32)[0])  # fmt: skip
    first.upsert_items([row])
    assert [h[0] for h in first.vector_search(acme, np.eye(4)[1], 5)] == ["a"]
    other = ItemRow("b", {"org_id": "acme", "user_id": "bob"}, "r", "y", [], 0.5, "stable",
                    embedding=np.eye(4, dtype=np.float32)[1])  # fmt: skip
    second.upsert_items([other])
    assert [h[0] for h in first.vector_search(acme, np.eye(4)[1], 5)] == ["b", "a"]
    first.close()
    second.close()


def test_sqlite_matrix_survives_another_connections_write_of_no_items(tmp_path: Any) -> None:
    """A run log (or category) committed by another process is no reason to re-read every
    vector: the cached matrix is dropped only when items changed, by anyone."""
    from memory_core.storage.layer.sqlite import SqliteLayerStore

    first, second = SqliteLayerStore(tmp_path / "l.db"), SqliteLayerStore(tmp_path / "l.db")
    first.provision(FIELDS, "create")
    second.provision(FIELDS, "validate")
    acme = {"org_id": ("acme",), "user_id": None}
    eye = np.eye(4, dtype=np.float32)

    def item(item_id: str, n: int) -> ItemRow:
        return ItemRow(item_id, {"org_id": "acme", "user_id": "ann"}, "r", item_id, [], 0.5,
                       "stable", embedding=eye[n])  # fmt: skip

    reads: list[str] = []
    first._conn.set_trace_callback(  # the statements the first store's connection runs
        lambda statement: (
            reads.append(statement) if "SELECT item_id, embedding" in statement else None
        )
    )
    first.upsert_items([item("a", 0)])
    assert [h[0] for h in first.vector_search(acme, eye[1], 5)] == ["a"]
    assert len(reads) == 1
    second.add_run(RunRow("r1", "retrieve", {"status": "ok"}, 1.0))
    assert [h[0] for h in first.vector_search(acme, eye[1], 5)] == ["a"]
    assert len(reads) == 1, "another connection's run log re-read the vectors"

    second.upsert_items([item("b", 1)])  # another connection's item: read again
    assert [h[0] for h in first.vector_search(acme, eye[1], 5)] == ["b", "a"]
    assert len(reads) == 2
    first.upsert_items([item("c", 2)])  # this store's own item: updated in place
    assert [h[0] for h in first.vector_search(acme, eye[2], 1)] == ["c"]
    assert len(reads) == 2

    # another connection's item, then this store's own write before its next search: the
    # in-place update must not hide the other item
    second.upsert_items([item("d", 3)])
    first.upsert_items([item("e", 3)])
    assert {h[0] for h in first.vector_search(acme, eye[3], 2)} == {"d", "e"}
    first.close()
    second.close()


def test_the_finished_run_of_an_engine_run_id_is_its_newest_ok_log(store: LayerStore) -> None:
    def log(run_id: str, kind: str, engine_id: str | None, status: str, at: float) -> None:
        body = {"status": status, **({"runner_run_id": engine_id} if engine_id else {})}
        store.add_run(RunRow(run_id, kind, body, at))

    log("a", "memorize", "wf-1", "failed", 1.0)
    assert store.finished_run("memorize", "wf-1") is None, "a failed run is not finished"
    log("b", "memorize", "wf-1", "ok", 2.0)
    log("c", "memorize", "wf-2", "ok", 3.0)
    log("d", "evolve", "wf-1", "ok", 4.0)
    log("e", "memorize", None, "ok", 5.0)

    found = store.finished_run("memorize", "wf-1")
    assert found is not None and (found.run_id, found.body["runner_run_id"]) == ("b", "wf-1")
    assert store.finished_run("retrieve", "wf-1") is None
    assert store.finished_run("memorize", "wf-3") is None


def test_a_sqlite_layer_file_that_cannot_be_opened_names_the_file_and_the_fix(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no" / "folder" / "layer.db"
    with pytest.raises(DatabaseUnavailableError) as unavailable:
        SqliteLayerStore(missing)
    assert unavailable.value.message.startswith(f"cannot open the layer store {missing}: ")
    assert "folder exists and is writable" in (unavailable.value.hint or "")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database, only text " * 200)
    with pytest.raises(DatabaseCorruptError) as corrupt:
        SqliteLayerStore(junk)
    assert f"the layer store {junk} is not a SQLite database" in corrupt.value.message
    assert "move this one aside" in (corrupt.value.hint or "")
