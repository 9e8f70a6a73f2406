"""Ranking quality with the real local embedder over sample_rules (paraphrased tasks too).

The full evaluation (and its baselines) is ``bench/rules_eval/run_eval.py``; this test keeps
the headline honest: recall of the labelled directives within the default 900-token budget.
"""

from __future__ import annotations

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
    from rules_testkit import open_memoir

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
