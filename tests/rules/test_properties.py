"""Properties of the whole pipeline on arbitrary input (Hypothesis, one store per test)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.errors import EmptyKnowledgeGraphError, InvalidInputError
from memory_core.service import MemoirSync

LINES = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "# Rule: X",
            "**Layer:** 2-Application",
            "**Layer:** Nowhere",
            "**Topics:** api, auth",
            "**Severity:** MUST",
            "## Directives",
            "### [MUST] Validate input",
            "### [SHOULD]",
            "- Never log secrets",
            "- [MAY] consider caching",
            "```python",
            "```",
            "## When to Apply",
            "- Adding an endpoint",
        ]
    ),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    documents=st.lists(st.lists(LINES, max_size=20).map("\n".join), min_size=1, max_size=3),
    task=st.text(min_size=1, max_size=80),
    budget=st.integers(min_value=1, max_value=1200),
)
def test_any_documents_and_task_never_crash_and_respect_the_budget(
    tmp_path: Path, documents: list[str], task: str, budget: int
) -> None:
    memoir = MemoirSync(
        f"sqlite:///{tmp_path / 'p.db'}",
        settings=load_settings(cwd=tmp_path, environ={}),
        embedder=create_embedder("hash:64"),
    )
    try:
        for index, text in enumerate(documents):
            try:
                memoir.rules.upsert_text(text, path=f"rules/doc-{index}.md", scope="p")
            except InvalidInputError:
                assert not text.strip()  # only empty documents are refused
        try:
            result = memoir.rules.query_directives(task, scope="p", token_budget=budget)
        except InvalidInputError:
            assert not task.strip()
            return
        except EmptyKnowledgeGraphError:
            return
        diagnostics = result.diagnostics
        assert diagnostics.tokens_used <= max(budget, 2000 if diagnostics.forced_must else budget)
        assert len(result.citations) == len(result.directives)
        assert sorted(d.ref or 0 for d in result.directives) == list(
            range(1, len(result.directives) + 1)
        )
        scores = [d.score for d in result.directives]
        assert scores == sorted(scores, reverse=True)
    finally:
        memoir.close()
