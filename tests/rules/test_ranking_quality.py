"""Ranking quality with the real local embedder over sample_rules (paraphrased tasks too).

The full evaluation (and its baselines) is ``bench/rules_eval/run_eval.py``; this test keeps
the headline honest: recall of the labelled directives within the default 900-token budget.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from memory_core.rules.service import RulesService
from memory_core.service import Memoir

ROOT = Path(__file__).resolve().parents[2]
TASKS = json.loads((ROOT / "bench" / "rules_eval" / "sample_tasks.json").read_text())["tasks"]

pytestmark = pytest.mark.anyio


def _recall(expected: list[list[str]], chosen: list[tuple[str, str]]) -> float:
    hits = sum(
        1
        for rule, prefix in expected
        if any(r == rule and text.casefold().startswith(prefix.casefold()) for r, text in chosen)
    )
    return hits / len(expected)


async def test_labelled_directives_are_found_within_the_default_budget(tmp_path: Path) -> None:
    from conftest import open_memoir

    memoir: Memoir = await open_memoir(tmp_path, "local")
    try:
        await memoir.embedder.ensure_loaded()
        service = RulesService(memoir.context, cwd=ROOT)
        report = await service.upsert_markdown([str(ROOT / "sample_rules")], scope="q")
        assert report.documents_failed == 0
        recalls: dict[str, list[float]] = {"literal": [], "paraphrased": []}
        for task in TASKS:
            result = await service.query_directives(task["task"], scope="q")
            assert result.diagnostics.tokens_used <= 900
            chosen = [(d.rule_id, d.text) for d in result.directives]
            kind = "paraphrased" if task.get("paraphrased") else "literal"
            recalls[kind].append(_recall(task["expected"], chosen))
    finally:
        await memoir.close()
    literal = sum(recalls["literal"]) / len(recalls["literal"])
    paraphrased = sum(recalls["paraphrased"]) / len(recalls["paraphrased"])
    assert literal >= 0.85, literal
    assert paraphrased >= 0.85, paraphrased


async def test_task_relevance_orders_and_severity_only_breaks_near_ties(tmp_path: Path) -> None:
    """Relevance is the backbone of the order: between two directives whose other graph
    signals (authority, When to Apply, layer, topics) are equal, the one more relevant to the
    task by more than 0.08 (the MUST-over-MAY severity span, 8 points, at weight 100) ranks
    first whatever their severities. At the old weight (30) a MUST 0.2 less relevant than a
    SHOULD still ranked above it."""
    from conftest import open_memoir

    memoir: Memoir = await open_memoir(tmp_path)
    try:
        await memoir.embedder.ensure_loaded()
        service = RulesService(memoir.context, cwd=ROOT)
        await service.upsert_markdown([str(ROOT / "sample_rules")], scope="q")
        inversions: list[str] = []
        for task in TASKS:
            result = await service.query_directives(task["task"], scope="q", max_items=50)
            ranked = result.directives
            for high, low in itertools.pairwise(ranked):
                a, b = high.breakdown, low.breakdown
                same_graph = (a.authority, a.when_to_apply, a.layer_match, a.topic_overlap) == (
                    b.authority,
                    b.when_to_apply,
                    b.layer_match,
                    b.topic_overlap,
                )
                assert a.relevance is not None and b.relevance is not None
                if same_graph and b.relevance - a.relevance > 0.08 + 0.03:
                    inversions.append(f"{task['id']}: {high.text[:40]!r} < {low.text[:40]!r}")
    finally:
        await memoir.close()
    assert not inversions, inversions
