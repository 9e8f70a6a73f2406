from __future__ import annotations

from pathlib import Path

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.service import MemoirSync


def test_the_sync_facade_exposes_every_document_method(tmp_path: Path) -> None:
    with MemoirSync(
        f"sqlite:///{tmp_path}/m.db",
        settings=load_settings(cwd=tmp_path, environ={}),
        embedder=create_embedder("hash:384"),
    ) as memoir:
        docs = memoir.documents
        assert docs.add_text("sync facade works", path="x.md", scope="s").added == 1
        assert docs.search("facade", scope="s").results[0].doc.path == "x.md"
        rql = docs.query_rql("SELECT doc.path FROM doc LIMIT 5", scope="s")
        assert [r.doc.path for r in rql.results] == ["x.md"]
        assert docs.context("facade", scope="s", budget_tokens=50).context.used_tokens > 0
        out = tmp_path / "e.jsonl"
        assert docs.export(out, scope="s").documents == 1
        assert docs.remove(["x.md/"], scope="s", purge=True).purged == {
            "documents": 1,
            "tombstones": 1,
        }
        assert docs.import_(out, scope="s").documents == 1
        assert docs.stats(scope="s")["documents"]["documents"] == 1
        assert docs.compact()["purged"]["documents"] == 0
