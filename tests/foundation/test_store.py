"""The SQLite store: items with their FTS and vector rows, migrations, embedder identity."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from memory_core.config import Settings
from memory_core.embed import create_embedder
from memory_core.errors import (
    DatabaseCorruptError,
    DatabaseUnavailableError,
    EmbedderMismatchError,
    EmbeddingError,
    SchemaError,
)
from memory_core.models import NewItem, content_hash, stable_id
from memory_core.retrieval.rewrite import rewrite_query
from memory_core.scope import Scope
from memory_core.service import Memoir
from memory_core.storage.ports import LexicalQuery
from memory_core.storage.sqlite.health import index_consistency

pytestmark = pytest.mark.anyio


def new_item(
    text: str, *, scope: str = "s", kind: str = "chunk", uid: str | None = None
) -> NewItem:
    return NewItem(
        uid=uid or stable_id(scope, kind, text),
        kind=kind,
        text=text,
        token_count=len(text.split()),
        scope=Scope.of(scope),
        content_hash=content_hash(text),
    )


async def add(memoir: Memoir, *texts: str, **kwargs: Any) -> list[int]:
    items = [new_item(t, **kwargs) for t in texts]
    vectors = await memoir.embedder.embed_documents([i.text for i in items])
    return await memoir.store.write(lambda tx: tx.items.add(items, vectors))


async def lexical(memoir: Memoir, word: str, scope: str, kinds: tuple[str, ...] = ()) -> list[Any]:
    query = LexicalQuery((word,), "OR")
    return await memoir.store.read(
        lambda tx: tx.lexical.search(query, Scope.of(scope), kinds=kinds)
    )  # type: ignore[arg-type]


async def test_new_store_file_is_private_and_in_wal_mode(memoir: Memoir, db_path: Path) -> None:
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    stats = await memoir.stats()
    assert stats["journal_mode"] == "wal"
    assert stats["schema_migrations"][0] == "0001_foundation"


async def test_item_fts_and_vector_rows_are_written_and_deleted_together(memoir: Memoir) -> None:
    ids = await add(memoir, "retry the request with exponential backoff", "cache the user profile")
    db = memoir.store.db
    assert await db.read(index_consistency) == {k: 0 for k in await db.read(index_consistency)}
    assert (await memoir.stats())["vectors"] == 2
    hits = await lexical(memoir, "backoff", "s")
    assert [h.item_id for h in hits] == [ids[0]]

    assert await memoir.store.write(lambda tx: tx.items.delete([ids[0]])) == 1
    assert await lexical(memoir, "backoff", "s") == []
    query = await memoir.embedder.embed_query("retry the request with exponential backoff")
    near = await memoir.store.vector_search(query, Scope.of("s"), k=5)
    assert ids[0] not in [h.item_id for h in near.hits]
    assert all(v == 0 for v in (await db.read(index_consistency)).values())


async def test_writing_the_same_uid_twice_changes_nothing(memoir: Memoir) -> None:
    first = await add(memoir, "idempotent write")
    second = await add(memoir, "idempotent write")
    assert first == second
    assert (await memoir.stats())["counts"]["item"] == 1


async def test_scope_and_kind_filter_inside_both_search_arms(memoir: Memoir) -> None:
    await add(memoir, "deploy with blue green", scope="a", kind="chunk")
    await add(memoir, "deploy with canary", scope="b", kind="chunk")
    await add(memoir, "deploy checklist memory", scope="a", kind="memory")
    hits = await lexical(memoir, "deploy", "a", ("chunk",))
    found = await memoir.store.read(lambda tx: tx.items.get([h.item_id for h in hits]))
    assert [i.text for i in found.values()] == ["deploy with blue green"]
    query = await memoir.embedder.embed_query("deploy")
    vector = await memoir.store.vector_search(query, Scope.of("b"), kinds=["chunk"], k=10)
    found = await memoir.store.read(lambda tx: tx.items.get([h.item_id for h in vector.hits]))
    assert [i.text for i in found.values()] == ["deploy with canary"]


async def test_vector_of_the_wrong_dimension_is_refused_and_nothing_is_written(
    memoir: Memoir,
) -> None:
    with pytest.raises(EmbeddingError, match="dimensions"):
        await memoir.store.write(
            lambda tx: tx.items.add([new_item("x")], np.zeros((1, 7), dtype=np.float32))
        )
    assert (await memoir.stats())["counts"]["item"] == 0


@hyp_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(min_size=1, max_size=400))
async def test_any_text_round_trips_byte_for_byte(memoir: Memoir, text: str) -> None:
    item = new_item(text, uid=stable_id("roundtrip", text))
    [item_id] = await memoir.store.write(lambda tx: tx.items.add([item]))
    stored = (await memoir.store.read(lambda tx: tx.items.get([item_id])))[item_id]
    assert stored.text.encode("utf-8", "surrogatepass") == text.encode("utf-8", "surrogatepass")
    assert stored.content_hash == content_hash(text)


@hyp_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=200))
async def test_any_text_is_a_safe_fts_query(memoir: Memoir, query: str) -> None:
    terms = rewrite_query(query).terms
    if not terms:
        assert not any(ch.isalnum() for ch in query)
        return
    for operator in ("AND", "OR"):
        lexical_query = LexicalQuery(terms, operator)  # type: ignore[arg-type]
        # must not raise
        await memoir.store.read(lambda tx, q=lexical_query: tx.lexical.search(q, Scope.of("s")))  # type: ignore[misc]


async def test_opening_twice_applies_each_migration_once(db_path: Path, settings: Settings) -> None:
    embedder = create_embedder("hash:64")
    for _ in range(2):
        memoir = await Memoir.open(f"sqlite:///{db_path}", settings=settings, embedder=embedder)
        stats = await memoir.stats()
        await memoir.close()
    assert stats["schema_migrations"] == ["0001_foundation", *stats["schema_migrations"][1:]]
    assert len(stats["schema_migrations"]) == len(set(stats["schema_migrations"]))


async def test_a_store_from_a_newer_memoir_is_refused(
    memoir: Memoir, db_path: Path, settings: Settings
) -> None:
    def bump(conn: Any) -> None:
        conn.execute("INSERT INTO schema_migration VALUES (9999, 'future', 'x')")

    await memoir.store.db.write(bump)
    with pytest.raises(SchemaError, match="newer"):
        await Memoir.open(
            f"sqlite:///{db_path}", settings=settings, embedder=create_embedder("hash:64")
        )


async def test_other_embedder_is_refused_until_reembed(
    memoir: Memoir, db_path: Path, settings: Settings
) -> None:
    await add(memoir, "first item", "second item")
    await memoir.close()
    url = f"sqlite:///{db_path}"
    with pytest.raises(EmbedderMismatchError) as caught:
        await Memoir.open(url, settings=settings, embedder=create_embedder("hash:32"))
    assert "memoir reembed" in (caught.value.hint or "")

    other = await Memoir.open(
        url, settings=settings, embedder=create_embedder("hash:32"), check_embedder=False
    )
    assert await other.reembed() == 2
    await other.close()
    reopened = await Memoir.open(url, settings=settings, embedder=create_embedder("hash:32"))
    stats = await reopened.stats()
    assert stats["embedder"] == {"id": "hash:32", "dimension": 32}
    assert stats["vectors"] == 2
    await reopened.close()


async def test_missing_store_is_not_created_when_creation_is_off(
    tmp_path: Path, settings: Settings
) -> None:
    with pytest.raises(DatabaseUnavailableError) as caught:
        await Memoir.open(f"sqlite:///{tmp_path}/nope.db", settings=settings, create=False)
    assert "memoir init" in (caught.value.hint or "")
    assert not (tmp_path / "nope.db").exists()


async def test_corrupt_file_is_reported_with_recovery_steps(
    tmp_path: Path, settings: Settings
) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(os.urandom(8192))
    with pytest.raises(DatabaseCorruptError) as caught:
        await Memoir.open(
            f"sqlite:///{path}", settings=settings, embedder=create_embedder("hash:64")
        )
    assert ".recover" in (caught.value.hint or "")


async def test_item_deletion_never_leaves_index_rows(memoir: Memoir) -> None:
    ids = await add(memoir, *[f"text number {i}" for i in range(20)])
    await memoir.store.write(lambda tx: tx.items.delete(ids[::2]))
    gaps = await memoir.store.db.read(index_consistency)
    assert all(v == 0 for v in gaps.values())
    assert await memoir.store.read(lambda tx: tx.items.count(None)) == 10


async def test_a_file_standing_where_the_folder_should_be_is_a_clear_error(
    tmp_path: Path, settings: Settings
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    with pytest.raises(DatabaseUnavailableError) as caught:
        await Memoir.open(
            f"sqlite:///{blocker}/memoir.db", settings=settings, embedder=create_embedder("hash:8")
        )
    assert str(blocker) in caught.value.message


async def test_doctor_runs_the_document_checks_and_reports_orphan_chunks(
    memoir: Memoir, db_path: Path, settings: Settings
) -> None:
    from memory_core.service import diagnose
    from memory_core.storage.sqlite.driver import select_driver

    await memoir.documents.add_text("a chunk of text about retries", path="virtual/a.md", scope="s")
    healthy = await diagnose(f"sqlite:///{db_path}", settings, embedder=memoir.embedder)
    assert {f.check: f.status for f in healthy.findings}["documents.orphan_chunks"] == "ok"
    await memoir.close()

    raw = select_driver().connect(str(db_path))  # foreign keys off: simulate outside damage
    raw.execute("DELETE FROM resource")
    raw.commit()
    raw.close()
    report = await diagnose(f"sqlite:///{db_path}", settings, embedder=memoir.embedder)
    orphan = {f.check: f for f in report.findings}["documents.orphan_chunks"]
    assert orphan.status == "error" and orphan.fix
    assert not report.ok
