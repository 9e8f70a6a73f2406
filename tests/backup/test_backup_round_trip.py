"""Backups carry every kind of memory, restore into a fresh store and export to the same bytes."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import numpy as np
import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.errors import InvalidInputError
from memory_core.models import Edge, ItemUpdate, NewEntity, NewItem
from memory_core.scope import Scope
from memory_core.service import Memoir
from memory_core.storage.ports import LexicalQuery

pytestmark = pytest.mark.anyio

RULE = """# Rule: Database access

## Metadata
- **Layer:** backend
- **Authoritative For:** database, sql
- **Topics:** postgres, migrations

## Directives
- **[MUST]** Use parameterised queries for every statement.
- **[SHOULD]** Keep migrations reversible.
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def open_store(path: Path, embedder: str = "hash:64") -> Memoir:
    settings = load_settings(cwd=path.parent, environ={})
    return await Memoir.open(
        f"sqlite:///{path}", settings=settings, embedder=create_embedder(embedder)
    )


async def fill(memoir: Memoir) -> None:
    project, memories = Scope.of("project:/app"), Scope.of("space:alice/work")
    docs = memoir.documents
    await docs.add_text(
        "Retries use exponential backoff.", path="notes/retry.md", scope=project, tags=["ops"]
    )
    await docs.add_text("Old runbook text.", path="notes/old.md", scope=project)
    await docs.remove(["notes/old.md"], scope=project)  # a tombstoned document
    await memoir.rules.upsert_text(RULE, path="rules/db.md", scope=project.key)
    await memoir.ingest_text(
        "Quokkas live on Rottnest Island. They are marsupials.", scope=project.key
    )
    vectors = await memoir.embedder.embed_documents(["prefers tabs", "prefers spaces"])
    ids = await memoir.store.write(
        lambda tx: tx.items.add(
            [
                NewItem(uid="m1", kind="memory", text="prefers tabs", token_count=2, scope=memories,
                        simhash=0xFFFF_0000_1234_8000, importance=0.9, pinned=True, tags=("style",)),
                NewItem(uid="m2", kind="memory", text="prefers spaces", token_count=2, scope=memories,
                        valid_from="2026-02-01T00:00:00+00:00", metadata={"source_ids": ["t7"]}),
            ],
            vectors,
        )
    )  # fmt: skip
    await memoir.store.write(lambda tx: tx.items.update(ids[0], ItemUpdate(superseded_by=ids[1])))
    await memoir.store.write(
        lambda tx: tx.tombstones.add(
            memories, "memory", "digest-x", expires_at="2099-01-01T00:00:00+00:00"
        )
    )
    await memoir.store.write(
        lambda tx: tx.log.record_event(memories, "pin", subject="m1", payload={"by": "user"})
    )
    ents = await memoir.store.write(
        lambda tx: tx.graph.ensure_entities(
            memories, [NewEntity("person", "alice", "Alice"), NewEntity("org", "acme", "Acme")]
        )
    )
    await memoir.store.write(
        lambda tx: tx.graph.apply_edges(
            memories,
            add=[
                Edge(
                    "entity", ents[("person", "alice")], "works_at", "entity", ents[("org", "acme")]
                )
            ],
            remove=[],
        )
    )
    await memoir.store.write(
        lambda tx: tx.graph.add_observations(
            memories, ents[("person", "alice")], ["likes tea", "on call"]
        )
    )
    await memoir.store.write(
        lambda tx: tx.meta.set("memory_settings:space:alice/work", '{"memory_enabled": true}')
    )


async def export_text(memoir: Memoir) -> str:
    out = io.StringIO()
    await memoir.export(out)
    return out.getvalue()


async def test_every_kind_round_trips_byte_for_byte(tmp_path: Path) -> None:
    source = await open_store(tmp_path / "a" / "memoir.db")
    try:
        await fill(source)
        first = await export_text(source)
    finally:
        await source.close()
    kinds = {line.split('"type":"')[1].split('"')[0] for line in first.splitlines()}
    assert {"resource", "category", "entity", "item", "relation", "observation", "supersede",
            "tombstone", "event", "run", "meta"} <= kinds  # fmt: skip
    item_kinds = {
        line.split('"kind":"')[1].split('"')[0]
        for line in first.splitlines()
        if '"type":"item"' in line
    }
    assert {"chunk", "directive", "hierarchy_chunk", "memory"} <= item_kinds

    target = await open_store(tmp_path / "b" / "memoir.db")
    try:
        report = await target.import_(io.StringIO(first))
        assert not report.reembedded  # type: ignore[union-attr]
        assert await export_text(target) == first
        again = await target.import_(io.StringIO(first))  # idempotent
        assert sum(again.written.values()) == 0  # type: ignore[union-attr]
        assert await export_text(target) == first
        # The restored store works: lexical, vector and rules indexes answer.
        project = Scope.of("project:/app")
        found = await target.documents.search("exponential backoff", scope=project)
        assert [r.doc.path for r in found.results][:1] == ["notes/retry.md"]
        answer = await target.rules.query_directives("write a SQL migration", scope=project.key)
        assert "parameterised" in answer.context_block
        memories = Scope.of("space:alice/work")
        near = await target.store.read(
            lambda tx: tx.items.near_simhash(memories, 0xFFFF_0000_1234_8001)
        )
        assert [i.uid for i in near] == ["m1"]
    finally:
        await target.close()


async def test_another_embedder_re_embeds_and_says_so(tmp_path: Path) -> None:
    source = await open_store(tmp_path / "a" / "memoir.db")
    try:
        await fill(source)
        dump = await export_text(source)
    finally:
        await source.close()
    target = await open_store(tmp_path / "b" / "memoir.db", embedder="hash:32")
    try:
        report = await target.import_(io.StringIO(dump))
        assert report.reembedded and report.warnings  # type: ignore[union-attr]
        query = await target.embedder.embed_query("prefers tabs")
        hits = await target.store.vector_search(query, Scope.of("space:alice/work"), k=1)
        items = await target.store.read(lambda tx: tx.items.get([h.item_id for h in hits.hits]))
        assert [i.text for i in items.values()] == ["prefers tabs"]
        assert np.asarray(query).shape == (32,)
        restored = await _directive_vectors(target)
    finally:
        await target.close()
    # A directive restored under another embedder gets the vector a fresh ingest gives it
    # (its rule title and heading embedded with it), not the vector of its bare item text.
    fresh = await open_store(tmp_path / "c" / "memoir.db", embedder="hash:32")
    try:
        await fresh.rules.upsert_text(RULE, path="rules/db.md", scope="project:/app")
        ingested = await _directive_vectors(fresh)
    finally:
        await fresh.close()
    assert restored.keys() == ingested.keys() and ingested
    for uid, vector in ingested.items():
        assert np.allclose(restored[uid], vector, atol=1e-5)


async def _directive_vectors(memoir: Memoir) -> dict[str, np.ndarray]:
    rows = await memoir.store.db.read(
        lambda conn: conn.execute(
            "SELECT item_id, uid FROM item WHERE kind = 'directive'"
        ).fetchall()
    )
    uid_of = {int(r[0]): str(r[1]) for r in rows}
    vectors = await memoir.store.read(lambda tx: tx.vectors.vectors(list(uid_of)))
    return {uid_of[i]: v for i, v in vectors.items()}


async def test_backup_files_are_private_and_bad_lines_are_named(tmp_path: Path) -> None:
    memoir = await open_store(tmp_path / "a" / "memoir.db")
    try:
        await memoir.documents.add_text("secret runbook", path="r.md", scope="s")
        out = tmp_path / "backup.jsonl"
        out.write_text("old")  # an existing, world-readable file is tightened too
        out.chmod(0o644)
        await memoir.export(out)
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        lines = out.read_text().splitlines()
        broken = "\n".join([lines[0], lines[1], "{not json", *lines[2:]])
        with pytest.raises(InvalidInputError, match="line 3"):
            await memoir.import_(io.StringIO(broken))
        with pytest.raises(InvalidInputError, match="unsupported export format"):
            await memoir.import_(io.StringIO('{"type":"header","format":"other"}\n'), scope="s")
    finally:
        await memoir.close()
    fresh = await open_store(tmp_path / "c" / "memoir.db")
    try:
        await fresh.import_(out)
        hits = await fresh.store.read(
            lambda tx: tx.lexical.search(LexicalQuery(("runbook",)), Scope.of("s"))
        )
        assert len(hits) == 1
    finally:
        await fresh.close()
