"""Incremental ingest: skipped when unchanged, replaced when changed, never a stale result."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import InvalidInputError, NotFoundError, PathNotAllowedError
from memory_core.service import Memoir
from memory_core.storage.sqlite.health import index_consistency

pytestmark = pytest.mark.anyio


async def _texts(memoir: Memoir, query: str) -> list[str]:
    response = await memoir.documents.search(query, scope="s", k=20, mode="lexical")
    return [r.chunk.text for r in response.results]


async def _consistent(memoir: Memoir) -> None:
    counts = await memoir.store.db.read(index_consistency)  # type: ignore[attr-defined]
    assert set(counts.values()) == {0}, counts


async def test_folder_ingest_chunks_embeds_and_indexes(memoir: Memoir, corpus: Path) -> None:
    report = await memoir.documents.add_paths([corpus], scope="s", tags=["docs"])
    assert (report.added, report.skipped) == (4, 0)
    stats = await memoir.documents.stats(scope="s")
    assert stats["documents"]["documents"] == 4
    assert stats["documents"]["chunks"] == report.chunks
    assert stats["store"]["vectors"] == report.chunks
    await _consistent(memoir)
    assert await _texts(memoir, "SigV4")


async def test_unchanged_files_are_skipped_and_ids_are_stable(memoir: Memoir, corpus: Path) -> None:
    first = await memoir.documents.add_paths([corpus], scope="s")
    second = await memoir.documents.add_paths([corpus], scope="s")
    assert second.unchanged == 4 and second.added == second.updated == 0
    assert [d.doc_id for d in first.documents] == [d.doc_id for d in second.documents]


async def test_edit_replaces_chunks_and_leaves_no_stale_results(
    memoir: Memoir, corpus: Path
) -> None:
    await memoir.documents.add_paths([corpus], scope="s")
    target = corpus / "api" / "auth.md"
    target.write_text("# Auth\n\nTokens are now signed with Ed25519 keys.\n", encoding="utf-8")
    report = await memoir.documents.add_paths([corpus], scope="s")
    assert (report.updated, report.unchanged) == (1, 3)
    assert await _texts(memoir, "SigV4") == []
    assert any("Ed25519" in t for t in await _texts(memoir, "Ed25519"))
    semantic = await memoir.documents.search("SigV4 access key", scope="s", k=20, mode="semantic")
    assert all("SigV4" not in r.chunk.text for r in semantic.results)
    await _consistent(memoir)


async def test_delete_and_rename(memoir: Memoir, corpus: Path) -> None:
    await memoir.documents.add_paths([corpus], scope="s")
    old = corpus / "ops" / "deploy.md"
    new = corpus / "ops" / "release.md"
    old.rename(new)
    await memoir.documents.remove([str(old)], scope="s")
    await memoir.documents.add_paths([corpus], scope="s")
    response = await memoir.documents.search("blue green", scope="s", k=10, mode="lexical")
    assert [r.doc.path for r in response.results] == [new.as_posix()]
    (corpus / "ops" / "notes.txt").unlink()
    removed = await memoir.documents.remove(
        [str(corpus / "ops" / "notes.txt")], scope="s", purge=True
    )
    assert removed.purged == {"documents": 2, "tombstones": 2}
    assert await _texts(memoir, "runbook") == []
    await _consistent(memoir)


async def test_rm_by_id_prefix_and_folder_and_not_found(memoir: Memoir, corpus: Path) -> None:
    report = await memoir.documents.add_paths([corpus], scope="s")
    doc_id = report.documents[0].doc_id
    assert doc_id
    removed = await memoir.documents.remove([doc_id[:10]], scope="s")
    assert [d.doc_id for d in removed.removed] == [doc_id]
    folder = await memoir.documents.remove([str(corpus / "ops")], scope="s")
    assert len(folder.removed) == 2
    with pytest.raises(NotFoundError):
        await memoir.documents.remove(["nosuchid"], scope="s")


async def test_bad_files_are_skipped_with_warnings(tmp_path: Path, store_factory: Any) -> None:
    root = tmp_path / "in"
    root.mkdir()
    (root / "ok.md").write_text("fine text", encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG\x00\x00\x01")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (root / "big.txt").write_text("word " * 400, encoding="utf-8")
    memoir = await store_factory(tmp_path / "m.db", documents={"max_file_bytes": 1000})
    try:
        report = await memoir.documents.add_paths([root], scope="s")
    finally:
        await memoir.close()
    assert (report.added, report.skipped) == (1, 3)
    text = " ".join(report.warnings)
    assert "binary" in text and "not UTF-8" in text and "max_file_bytes" in text


async def test_unreadable_file_is_skipped(memoir: Memoir, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can read any file")
    secret = tmp_path / "secret.md"
    secret.write_text("x", encoding="utf-8")
    secret.chmod(0)
    report = await memoir.documents.add_paths([secret], scope="s")
    assert report.skipped == 1 and "cannot read" in report.warnings[0]


async def test_symlinks_outside_the_root_and_loops_are_skipped(
    memoir: Memoir, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "in.md").write_text("inside", encoding="utf-8")
    outside = tmp_path / "outside.md"
    outside.write_text("outside secret", encoding="utf-8")
    (root / "escape.md").symlink_to(outside)
    (root / "sub" / "loop").symlink_to(root)
    report = await memoir.documents.add_paths([root], scope="s")
    assert report.added == 1
    joined = " ".join(report.warnings)
    assert "outside" in joined and "loop" in joined
    assert await _texts(memoir, "secret") == []


async def test_globs_ignores_and_patterns_outside_the_root(memoir: Memoir, corpus: Path) -> None:
    report = await memoir.documents.add_paths(
        [corpus], scope="s", globs=["**/*.md"], ignores=["ops/**"]
    )
    assert sorted(Path(d.path).name for d in report.documents) == ["auth.md", "limits.md"]
    with pytest.raises(PathNotAllowedError):
        await memoir.documents.add_paths([corpus], scope="s", globs=["../**"])
    with pytest.raises(InvalidInputError):
        await memoir.documents.add_paths([corpus / "missing"], scope="s")


async def test_mtime_only_skips_without_reading(memoir: Memoir, corpus: Path) -> None:
    await memoir.documents.add_paths([corpus], scope="s")
    target = corpus / "ops" / "notes.txt"
    stat = target.stat()
    target.write_text("Runbook: RECOVERY after an outage.\n", encoding="utf-8")  # same size
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    skipped = await memoir.documents.add_paths([corpus], scope="s", mtime_only=True)
    assert skipped.unchanged == 4
    full = await memoir.documents.add_paths([corpus], scope="s")
    assert full.updated == 1


async def test_add_text_and_tags_are_kept_on_plain_re_add(memoir: Memoir) -> None:
    first = await memoir.documents.add_text(
        "hello text", path="./notes//a.md", scope="s", tags=["t1, t2"]
    )
    assert first.documents[0].path == "notes/a.md"
    again = await memoir.documents.add_text("hello text", path="notes/a.md", scope="s")
    assert again.unchanged == 1
    response = await memoir.documents.search("hello", scope="s", filter="doc.tag = 't2'")
    assert len(response.results) == 1
    retag = await memoir.documents.add_text("hello text", path="notes/a.md", scope="s", tags=["t3"])
    assert retag.updated == 1 and retag.documents[0].doc_id == first.documents[0].doc_id
    with pytest.raises(InvalidInputError):
        await memoir.documents.add_text("  ", path="x.md", scope="s")
    with pytest.raises(PathNotAllowedError):
        await memoir.documents.add_text("x", path="../x.md", scope="s")
