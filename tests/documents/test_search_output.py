"""Search, RQL and context responses: golden JSON, spec ordering, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import BudgetError, InvalidInputError, QuerySyntaxError
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio

GOLDEN = Path(__file__).parent / "golden"
TEXTS = {
    "api/limits.md": "The API returns 429 when the rate limit is exceeded. Clients retry "
    "with exponential backoff and jitter.",
    "api/auth.md": "Requests to S3 are signed with SigV4 using the access key and secret.",
    "ops/deploy.md": "Zero-downtime deploy uses blue green switching. Health checks gate "
    "the switch; a failed check rolls back the deploy.",
    "ops/runbook.md": "Recovery runbook: restore the database from the last snapshot, then "
    "replay the write-ahead log. Retry the restore if the checksum fails.",
}


def normalise(value: Any) -> Any:
    """Drop what legitimately varies between runs: timings and ingest times."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "took_ms":
                out[key] = 0
            elif key in ("mtime", "snapshot"):
                out[key] = "<time>"
            else:
                out[key] = normalise(item)
        return out
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def check_golden(name: str, payload: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(normalise(payload), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("MEMOIR_UPDATE_GOLDEN") or not path.exists():
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} changed; review, then re-run with MEMOIR_UPDATE_GOLDEN=1"
    )


@pytest.fixture
async def store(memoir: Memoir) -> Memoir:
    for path, text in TEXTS.items():
        tags = [path.split("/")[0]]
        await memoir.documents.add_text(text, path=path, scope="s", tags=tags, source="test")
    return memoir


async def test_search_json_is_the_spec_shape(store: Memoir) -> None:
    response = await store.documents.search("retry backoff", scope="s", k=3)
    body = response.to_json()
    assert list(body)[:3] == ["ok", "schema_version", "query"]
    assert {"results", "stats", "warnings"} <= set(body) and "error" not in body
    first = body["results"][0]
    assert set(first) == {"score", "doc", "chunk"}
    assert {"id", "path", "mtime", "hash", "tag", "source"} <= set(first["doc"])
    assert {"id", "doc_id", "offset", "tokens", "text"} <= set(first["chunk"])
    check_golden("search", body)


async def test_explain_golden(store: Memoir) -> None:
    response = await store.documents.search("retry the restore", scope="s", k=4, explain=True)
    body = response.to_json()
    for result in body["results"]:
        assert {"lexical", "semantic", "lexical_rank", "semantic_rank", "fused"} <= set(
            result["explain"]
        )
    check_golden("search_explain", body)


async def test_rql_golden(store: Memoir) -> None:
    response = await store.documents.query_rql(
        "SELECT chunk.text, chunk.doc_id, score FROM chunk USING semantic('rate limit'), "
        "lexical('429') FILTER doc.path GLOB '**/*.md' AND chunk.tokens <= 256 LIMIT 2",
        scope="s",
    )
    body = response.to_json()
    assert body["next_offset"] == 2
    check_golden("rql", body)


async def test_context_golden_and_byte_identical(store: Memoir) -> None:
    first = await store.documents.context("retry", scope="s", budget_tokens=40, diversity=1)
    second = await store.documents.context("retry", scope="s", budget_tokens=40, diversity=1)
    a, b = first.to_json(), second.to_json()
    assert json.dumps(a["context"]) == json.dumps(b["context"])
    context = a["context"]
    assert context["used_tokens"] <= 40
    assert len({c["doc_id"] for c in context["chunks"]}) == len(context["chunks"])
    for chunk in context["chunks"]:
        assert {"path", "offset", "end_offset", "hash", "mtime"} <= set(chunk)
    check_golden("context", a)


async def test_ties_follow_the_spec_order(memoir: Memoir) -> None:
    for name in ("b.md", "a.md", "c/a.md"):
        await memoir.documents.add_text("identical words here", path=name, scope="s")
    response = await memoir.documents.search("identical", scope="s", k=3, mode="lexical")
    assert [r.doc.path for r in response.results] == ["a.md", "b.md", "c/a.md"]


async def test_rql_pagination_is_stable(store: Memoir) -> None:
    rql = "SELECT chunk.id, score FROM chunk USING lexical('the') LIMIT 2 OFFSET {}"
    page1 = await store.documents.query_rql(rql.format(0), scope="s")
    page2 = await store.documents.query_rql(rql.format(2), scope="s")
    everything = await store.documents.query_rql(
        rql.replace("LIMIT 2", "LIMIT 4").format(0), scope="s"
    )
    ids = [r.chunk.id for r in page1.results + page2.results]
    assert ids == [r.chunk.id for r in everything.results]


async def test_rql_doc_results_group_by_document(store: Memoir) -> None:
    response = await store.documents.query_rql(
        "SELECT doc.path, score FROM doc USING lexical('retry') LIMIT 10", scope="s"
    )
    paths = [r.doc.path for r in response.results]
    assert sorted(paths) == ["api/limits.md", "ops/runbook.md"]
    assert all(r.chunk is None for r in response.results)


@pytest.mark.parametrize(
    "query", ['"unbalanced', "NEAR(a b) AND OR NOT", "col:*^", "-(", "'; DROP TABLE item; --"]
)
async def test_fts_operators_and_quotes_never_raise(store: Memoir, query: str) -> None:
    response = await store.documents.search(query, scope="s")
    assert response.ok


async def test_bad_input_is_refused_clearly(store: Memoir) -> None:
    with pytest.raises(InvalidInputError):
        await store.documents.search("   ", scope="s")
    with pytest.raises(InvalidInputError):
        await store.documents.search("x", scope="s", k=0)
    with pytest.raises(QuerySyntaxError):
        await store.documents.search("x", scope="s", filter="path = 'x'")
    with pytest.raises(BudgetError):
        await store.documents.context("retry", scope="s", budget_tokens=-5)


async def test_a_query_of_only_punctuation_warns_instead_of_failing(store: Memoir) -> None:
    response = await store.documents.search("?!", scope="s", mode="lexical")
    assert response.results == []
    assert any("no searchable words" in w for w in response.warnings)
