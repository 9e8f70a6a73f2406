"""``query_directives`` answers exactly what the recorded snapshot says, query by query.

A guard for performance work on the query path (issue 10): a speed-up must not move a
directive, a score, a reason or a token. The snapshot holds, for each query, the ranked
directive ids with their scores, relevance, reason, forced flag and ``[n]`` ref, plus a
digest of the context block and the diagnostics' counts. Queries: the 38 labelled tasks
over ``sample_rules`` (default budget, and a few with a mode, strict layer, breadcrumbs, a
small budget) and 40 bench-style tasks over a synthetic template corpus shaped like
``bench/bench_rules.py``'s (2,000 there, 400 here). The hash embedder keeps it exact and fast.

A deliberate ranking change (issue 9) regenerates it:
``MEMOIR_UPDATE_QUERY_SNAPSHOT=1 .venv/bin/pytest tests/rules/test_query_snapshot.py``,
and the diff of ``data/query_snapshot.json`` shows what moved.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from memory_core.rules.models import DirectiveQueryResult
from memory_core.rules.service import RulesService

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).parent / "data" / "query_snapshot.json"
SAMPLE_TASKS = [
    t["task"]
    for t in json.loads((ROOT / "bench" / "rules_eval" / "sample_tasks.json").read_text())["tasks"]
]

pytestmark = pytest.mark.anyio

_LAYERS = ["1-Presentation", "2-Application", "3-Domain", "4-Persistence", "5-Tests", "*"]
_TOPICS = ["api", "security", "testing", "persistence", "logging", "performance", "deployment"]
_VERBS = ["Validate", "Log", "Cache", "Test", "Retry", "Paginate", "Index", "Encrypt"]
_OBJECTS = [
    "request bodies",
    "database queries",
    "user sessions",
    "API responses",
    "migrations",
    "background jobs",
    "secrets",
    "webhooks",
    "audit logs",
    "cache entries",
]
_QUALIFIERS = [
    "before every release",
    "at the service boundary",
    "with bounded retries",
    "in the repository layer",
    "in one transaction",
    "with a timeout",
]


def _template_rule(index: int, rng: random.Random) -> str:
    topics = rng.sample(_TOPICS, 3)
    lines = [
        f"# Rule: Synthetic rule {index} on {topics[0]}",
        "",
        f"**Layer:** {_LAYERS[index % len(_LAYERS)]}",
        f"**AuthoritativeFor:** {topics[0]}-{index % 20}, {topics[0]}",
        f"**Topics:** {', '.join(topics)}",
        "**Severity:** SHOULD",
        "",
        "## When to Apply",
        f"- Changing {rng.choice(_OBJECTS)} {rng.choice(_QUALIFIERS)}",
        "",
        "## Directives",
        "",
    ]
    for d in range(4):
        severity = ("MUST", "SHOULD", "MAY")[(index + d) % 3]
        # Every fifth rule restates a directive of another one (restatement merging).
        statement = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_QUALIFIERS)}" + (
            "" if index % 5 == 0 and d == 0 else f" ({index}.{d})"
        )
        lines += [
            f"### [{severity}] {statement}",
            f"Applies to {rng.choice(_OBJECTS)}.",
            "",
            f"**Rationale:** keeps {topics[d % 3]} predictable.",
            "",
        ]
    return "\n".join(lines) + "\n"


def _bench_tasks(count: int) -> list[str]:
    rng = random.Random(11)
    return [
        f"{rng.choice(['Add', 'Fix', 'Refactor', 'Speed up', 'Secure'])} the "
        f"{rng.choice(_OBJECTS)} {rng.choice(_QUALIFIERS)} for task {i}"
        for i in range(count)
    ]


def _snapshot(result: DirectiveQueryResult) -> dict[str, Any]:
    stats = result.diagnostics.retrieval_stats
    return {
        "directives": [
            [
                d.directive_id[:12],
                round(d.score, 4),
                round(d.breakdown.relevance or 0.0, 4),
                d.reason,
                d.forced,
                d.ref,
                "".join(arm[0] for arm in d.matched_by),  # l, s, g
            ]
            for d in result.directives
        ],
        "block_sha1": hashlib.sha1(result.context_block.encode()).hexdigest(),
        "tokens_used": result.diagnostics.tokens_used,
        "forced_must": result.diagnostics.forced_must,
        "considered": stats.considered,
        "dropped_for_budget": stats.dropped_for_budget,
        "below_relevance": stats.below_relevance,
        "citations": [[c.ref, c.directive_id[:12], c.line_start] for c in result.citations],
    }


async def _answers(tmp_path: Path) -> dict[str, Any]:
    from rules_testkit import open_memoir

    corpus = tmp_path / "rules"
    corpus.mkdir()
    rng = random.Random(7)
    for index in range(100):
        (corpus / f"rule-{index:03d}.md").write_text(_template_rule(index, rng), encoding="utf-8")
    memoir = await open_memoir(tmp_path)
    answers: dict[str, Any] = {}
    try:
        await memoir.embedder.ensure_loaded()
        sample = RulesService(memoir.context, cwd=ROOT)
        report = await sample.upsert_markdown([str(ROOT / "sample_rules")], scope="sample")
        assert report.documents_failed == 0
        synthetic = RulesService(memoir.context, cwd=tmp_path)
        report = await synthetic.upsert_markdown([str(corpus)], scope="synthetic")
        assert report.directives_added >= 390
        for i, task in enumerate(SAMPLE_TASKS):
            result = await sample.query_directives(task, scope="sample")
            answers[f"sample/{i}"] = _snapshot(result)
        variants: list[tuple[str, dict[str, Any]]] = [
            ("mode=review", {"mode_slug": "review"}),
            ("strict", {"strict_layer": True}),
            ("breadcrumbs", {"include_breadcrumbs": True}),
            ("budget=150", {"token_budget": 150}),
            ("max_items=5", {"max_items": 5}),
        ]
        for i, task in enumerate(SAMPLE_TASKS[:8]):
            for name, kwargs in variants:
                result = await sample.query_directives(task, scope="sample", **kwargs)
                answers[f"sample/{i}/{name}"] = _snapshot(result)
        for i, task in enumerate(_bench_tasks(40)):
            result = await synthetic.query_directives(task, scope="synthetic")
            answers[f"synthetic/{i}"] = _snapshot(result)
    finally:
        await memoir.close()
    return answers


async def test_query_answers_match_the_recorded_snapshot(tmp_path: Path) -> None:
    answers = await _answers(tmp_path)
    if os.environ.get("MEMOIR_UPDATE_QUERY_SNAPSHOT") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        lines = (f"{json.dumps(key)}: {json.dumps(answers[key])}" for key in sorted(answers))
        SNAPSHOT.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one query a line
        pytest.skip("snapshot rewritten")
    expected = json.loads(SNAPSHOT.read_text())
    assert sorted(answers) == sorted(expected)
    changed = [key for key in expected if answers[key] != expected[key]]
    first = changed[0] if changed else None
    assert not changed, (
        f"{len(changed)} of {len(expected)} answers changed, first {first}:\n"
        f"now      {answers[first] if first else None}\n"
        f"recorded {expected[first] if first else None}"
    )
