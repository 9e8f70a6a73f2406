"""FEL compiled to SQL: the values are data, never SQL; operators mean what the spec says."""

from __future__ import annotations

import pytest

from memory_core.globbing import glob_match
from memory_core.service import Memoir
from memory_core.storage.sqlite.filter_sql import like_to_glob

pytestmark = pytest.mark.anyio


async def _paths(memoir: Memoir, flt: str) -> list[str]:
    response = await memoir.documents.query_rql(
        f"SELECT doc.path FROM doc FILTER {flt} ORDER BY doc.path LIMIT 100", scope="s"
    )
    return [r.doc.path for r in response.results]


@pytest.fixture
async def tagged(memoir: Memoir) -> Memoir:
    docs = memoir.documents
    await docs.add_text("alpha one", path="api/v1/Limits.md", scope="s", tags=["api", "ops"])
    await docs.add_text("beta two", path="api/auth.md", scope="s", tags=["api"], source="wiki")
    await docs.add_text("gamma three", path="ops/deploy.txt", scope="s", tags=["ops"])
    return memoir


async def test_sql_in_values_is_treated_as_text(tagged: Memoir) -> None:
    assert await _paths(tagged, "doc.tag = 'x'' OR 1=1 --'") == []
    assert await _paths(tagged, "doc.path = 'a''); DROP TABLE item; --'") == []
    # The store is intact.
    assert len(await _paths(tagged, "doc.tag = 'api'")) == 2


async def test_tag_membership_and_negation(tagged: Memoir) -> None:
    assert await _paths(tagged, "doc.tag = 'ops'") == ["api/v1/Limits.md", "ops/deploy.txt"]
    assert await _paths(tagged, "doc.tag != 'ops'") == ["api/auth.md"]
    assert await _paths(tagged, "doc.tag IN ('zzz', 'api') AND NOT doc.tag = 'ops'") == [
        "api/auth.md"
    ]


async def test_glob_uses_path_semantics_and_like_is_case_sensitive(tagged: Memoir) -> None:
    assert await _paths(tagged, "doc.path GLOB '**/*.md'") == ["api/auth.md", "api/v1/Limits.md"]
    assert await _paths(tagged, "doc.path GLOB 'api/*.md'") == ["api/auth.md"]
    assert await _paths(tagged, "doc.path LIKE '%limits%'") == []
    assert await _paths(tagged, "doc.path LIKE '%Limits%'") == ["api/v1/Limits.md"]


async def test_missing_values_count_as_not_equal(tagged: Memoir) -> None:
    assert await _paths(tagged, "doc.source != 'wiki'") == ["api/v1/Limits.md", "ops/deploy.txt"]
    assert await _paths(tagged, "doc.source NOT IN ('wiki')") == [
        "api/v1/Limits.md",
        "ops/deploy.txt",
    ]


async def test_numeric_chunk_fields_compare_as_numbers(tagged: Memoir) -> None:
    response = await tagged.documents.query_rql(
        "SELECT chunk.tokens FROM chunk FILTER chunk.tokens >= 2 AND chunk.offset = 0", scope="s"
    )
    assert response.results and all(r.chunk.tokens >= 2 for r in response.results)


def test_like_and_glob_translation() -> None:
    assert like_to_glob("a%b_c*[") == "a*b?c[*][[]"
    assert glob_match("**/api/**", "/srv/api/v1/x.md")
    assert glob_match("**/api/**", "api/x")
    assert not glob_match("*.md", "a/b.md")
    assert glob_match("[!a]?.md", "bc.md")
