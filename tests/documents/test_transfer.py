"""Export / import: a round trip is lossless; another embedder re-embeds and says so."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.errors import InvalidInputError
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio


async def _export(memoir: Memoir, scope: str = "s") -> list[dict[str, Any]]:
    buffer = io.StringIO()
    await memoir.documents.export(buffer, scope=scope)
    return [json.loads(line) for line in buffer.getvalue().split("\n") if line]


async def test_round_trip_is_equal_without_re_embedding(
    memoir: Memoir, corpus: Path, tmp_path: Path, store_factory: Any
) -> None:
    await memoir.documents.add_paths([corpus], scope="s", tags=["docs"], source="git")
    out = tmp_path / "export.jsonl"
    report = await memoir.documents.export(out, scope="s")
    assert report.documents == 4 and report.chunks >= 4
    other = await store_factory(tmp_path / "other.db")
    try:
        imported = await other.documents.import_(out, scope="s")
        assert not imported.reembedded and imported.documents == 4
        assert await _export(other) == await _export(memoir)
        again = await other.documents.import_(out, scope="s")
        assert again.unchanged == 4  # stable ids: importing twice changes nothing
        hits = await other.documents.search("SigV4", scope="s")
        assert hits.results and hits.results[0].doc.tags == ["docs"]
    finally:
        await other.close()


async def test_import_with_another_embedder_re_embeds(
    memoir: Memoir, corpus: Path, tmp_path: Path, store_factory: Any
) -> None:
    await memoir.documents.add_paths([corpus], scope="s")
    out = tmp_path / "export.jsonl"
    await memoir.documents.export(out, scope="s")
    other = await store_factory(tmp_path / "other.db", embedder="hash:64")
    try:
        report = await other.documents.import_(out, scope="s")
        assert report.reembedded and "re-embedded" in report.warnings[0]
        exported = await _export(other)
        assert exported[0]["embedder"] == "hash:64"
        assert [r["text"] for r in exported if r["type"] == "chunk"] == [
            r["text"] for r in await _export(memoir) if r["type"] == "chunk"
        ]
    finally:
        await other.close()


@pytest.mark.parametrize(
    "content",
    [
        "not json\n",
        '{"type": "doc"}\n',
        '{"type":"header","format":"other/9"}\n',
        '{"type":"header","format":"memoir-documents/1","embedder":"hash:384","dimension":384}\n{"type":"chunk","doc_id":"x"}\n',
    ],
)
async def test_import_refuses_what_is_not_an_export(
    memoir: Memoir, tmp_path: Path, content: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInputError):
        await memoir.documents.import_(path, scope="s")


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.text(min_size=1, max_size=200).filter(str.strip), min_size=1, max_size=4))
async def test_any_text_round_trips(memoir: Memoir, texts: list[str]) -> None:
    scope = f"h{abs(hash(tuple(texts)))}"
    for index, text in enumerate(texts):
        await memoir.documents.add_text(text, path=f"n/{index}.md", scope=scope)
    exported = await _export(memoir, scope)
    buffer = io.StringIO()
    await memoir.documents.export(buffer, scope=scope)
    await memoir.documents.remove(["n/"], scope=scope, purge=True)
    await memoir.documents.import_(io.StringIO(buffer.getvalue()), scope=scope)
    assert await _export(memoir, scope) == exported
