"""Labelled evaluation of directive retrieval: recall within a token budget.

For each task of the task file (``sample_tasks.json``) the labelled
directives are the ones a senior engineer would want surfaced. We ingest the task file's
corpus into a fresh store with the real local embedder and measure, at the same budget:

- memoir: ``RulesService.query_directives`` (the full pipeline);
- keyword overlap: directives ranked by shared content words with the task, packed with the
  same renderer and budget (the baseline the issue names);
- dump: every rule file concatenated (its total tokens), and its recall when cut at the budget.

Run: ``.venv/bin/python bench/rules_eval/run_eval.py [--budget 900] [--verbose]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.rules.context_block import pack_directives  # noqa: E402
from memory_core.rules.models import RankedDirective, ScoreBreakdown  # noqa: E402
from memory_core.rules.scoring import content_stems  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

HERE = Path(__file__).resolve().parent
_ENV = {k: v for k, v in os.environ.items() if k.startswith("MEMOIR_RULES__")}
TASK_FILES = ("sample_tasks.json",)


def _matches(label: list[str], rule_id: str, statement: str) -> bool:
    return rule_id == label[0] and statement.casefold().startswith(label[1].casefold())


def _recall(expected: list[list[str]], chosen: list[tuple[str, str]]) -> float:
    found = sum(1 for label in expected if any(_matches(label, r, s) for r, s in chosen))
    return found / len(expected)


async def _evaluate(
    task_file: Path, budget: int, verbose: bool, embedder_spec: str
) -> dict[str, Any]:
    spec = json.loads(task_file.read_text(encoding="utf-8"))
    names = spec["corpus"] if isinstance(spec["corpus"], list) else [spec["corpus"]]
    corpora = [(ROOT / name).resolve() for name in names]
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(cwd=Path(tmp), environ=_ENV)
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/eval.db", settings=settings, embedder=create_embedder(embedder_spec)
        )
        service = RulesService(memoir.context, cwd=ROOT)
        try:
            await memoir.embedder.ensure_loaded()
            report = await service.upsert_markdown(
                [str(c) for c in corpora], scope="eval", allowed_roots=[str(c) for c in corpora]
            )
            assert report.documents_failed == 0, report.warnings
            index = await service._index(
                Scope.of("eval")
            )  # the eval reads the same index as the ranker
            directives = list(index.directives.values())
            all_pairs = [(d.rule_id, d.statement) for d in directives]
            for task in spec["tasks"]:
                for label in task["expected"]:
                    if not any(_matches(label, r, s) for r, s in all_pairs):
                        raise SystemExit(f"label {label} of task {task['id']} matches no directive")
            # Keyword-overlap baseline material: statement, detail, section and rule title.
            rows = await memoir.store.db.read(
                lambda conn: {
                    r[0]: r[1]
                    for r in conn.execute("SELECT item_id, text FROM item WHERE kind='directive'")
                }
            )
            stems = {
                d.item_id: content_stems(
                    " ".join(
                        (
                            rows.get(d.item_id, d.statement),
                            " ".join(d.section),
                            (index.rules[d.rule_id].title or "")
                            if d.rule_id in index.rules
                            else "",
                        )
                    )
                )
                for d in directives
            }
            files = sorted(p for c in corpora for p in c.rglob("*") if p.is_file())
            dump = "\n\n".join(p.read_text(encoding="utf-8") for p in files)
            dump_tokens = memoir.tokens.count(dump)
            dump_cut = memoir.tokens.truncate(dump, budget)

            results: dict[str, list[float]] = {"memoir": [], "keyword": [], "dump_cut": []}
            split: dict[str, dict[str, list[float]]] = {"literal": {}, "paraphrased": {}}
            tokens: dict[str, list[int]] = {"memoir": [], "keyword": []}
            ms: list[float] = []
            disjoint = 0
            for task in spec["tasks"]:
                text = task["task"]
                expected = task["expected"]
                task_stems = content_stems(text)
                kind = "paraphrased" if task.get("paraphrased") else "literal"
                if kind == "paraphrased":
                    # "Shares no words": no content word in common with the labelled
                    # directives' statement, detail, rationale, anti-patterns and headings.
                    words: set[str] = set()
                    for label in expected:
                        for d in directives:
                            if _matches(label, d.rule_id, d.statement):
                                words |= stems[d.item_id]
                    if not task_stems & words:
                        disjoint += 1
                    elif verbose:
                        print(
                            f"  shared words {task['id']}: {sorted(task_stems & words)}",
                            file=sys.stderr,
                        )
                result = await service.query_directives(text, scope="eval", token_budget=budget)
                chosen = [(d.rule_id, d.text) for d in result.directives]
                recall = _recall(expected, chosen)
                results["memoir"].append(recall)
                tokens["memoir"].append(result.diagnostics.tokens_used)
                ms.append(result.diagnostics.execution_ms)

                ranked = sorted(
                    (d for d in directives if stems[d.item_id] & task_stems),
                    key=lambda d: (-len(stems[d.item_id] & task_stems), d.item_id),
                )
                packed = pack_directives(
                    [_as_ranked(d, index) for d in ranked],
                    header="## Project rules for this task\n",
                    budget=budget,
                    safety_cap=budget,
                    count=memoir.tokens.count,
                )
                keyword_chosen = [(d.rule_id, d.text) for d in packed.selected]
                keyword_recall = _recall(expected, keyword_chosen)
                results["keyword"].append(keyword_recall)
                tokens["keyword"].append(packed.tokens_used)
                cut = sum(1 for label in expected if label[1].casefold() in dump_cut.casefold())
                results["dump_cut"].append(cut / len(expected))
                for method, value in (("memoir", recall), ("keyword", keyword_recall)):
                    split[kind].setdefault(method, []).append(value)
                if verbose and recall < 1:
                    missing = [
                        label
                        for label in expected
                        if not any(_matches(label, r, s) for r, s in chosen)
                    ]
                    print(f"  miss {task['id']}: {missing}", file=sys.stderr)
            return {
                "task_file": task_file.name,
                "corpus": spec["corpus"],
                "documents": report.documents_processed,
                "directives": len(directives),
                "tasks": len(spec["tasks"]),
                "paraphrased_tasks": sum(1 for t in spec["tasks"] if t.get("paraphrased")),
                "paraphrased_disjoint": disjoint,
                "labels": sum(len(t["expected"]) for t in spec["tasks"]),
                "budget": budget,
                "recall": {k: round(statistics.mean(v), 3) for k, v in results.items()},
                "recall_split": {
                    kind: {m: round(statistics.mean(v), 3) for m, v in methods.items()}
                    for kind, methods in split.items()
                    if methods
                },
                "tokens_mean": {k: round(statistics.mean(v), 1) for k, v in tokens.items()},
                "tokens_max": {k: max(v) for k, v in tokens.items()},
                "dump_tokens": dump_tokens,
                "query_ms_median": round(statistics.median(ms), 2),
            }
        finally:
            await service.close()  # its queued run records go out before the store shuts
            await memoir.close()


def _as_ranked(directive: Any, index: Any) -> RankedDirective:
    rule = index.rules.get(directive.rule_id)
    zero = ScoreBreakdown(
        authority=0,
        when_to_apply=0,
        layer_match=0,
        topic_overlap=0,
        severity_boost=0,
        semantic_sim=0,
        weights={},
        total=0,
    )
    return RankedDirective(
        directive_id=directive.uid,
        rule_id=directive.rule_id,
        rule_title=rule.title if rule else None,
        text=directive.statement,
        severity=directive.severity,
        source_path=directive.uri,
        score=0,
        breakdown=zero,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=900)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--only", default=None, help="one task file name")
    args = parser.parse_args()
    for name in TASK_FILES:
        path = HERE / name
        if not path.exists() or (args.only and name != args.only):
            continue
        summary = anyio.run(_evaluate, path, args.budget, args.verbose, args.embedder)
        print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
