"""Tune the relevance gate of ``query_directives`` on the public dev set (memoir:folder).

Ingests each set's folder once (``memoir rules upsert <folder>``, the real local embedder),
then replays every task under a grid of gate settings (floor, ratio, relevance weight in the
final order) and prints recall, precision, tokens and directives returned per setting, macro
over tasks. The chosen setting goes into ``memory_core/rules/service.py``.

Run: ``.venv/bin/python bench/rules_eval/tune_gate.py [--budget 900] [--sets a,b]``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_dev  # noqa: E402  (sets up sys.path for the repository)
from run_dev import Candidate, _relative, ds, matches  # noqa: E402

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.rules import relevance as relevance_module  # noqa: E402
from memory_core.rules import service as service_module  # noqa: E402
from memory_core.rules.relevance import RelevanceGate  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

GRID = {
    "floor": (0.0, 0.2, 0.25),
    "ratio": (0.0, 0.5),
    "weight": (30.0, 100.0, 1000.0),
    "lexical": (0.2, 0.4),
}


async def _run(budget: int, sets: list[str]) -> None:
    tasks = [t for t in ds.load_tasks() if t.set in sets]
    by_set: dict[str, list[Any]] = defaultdict(list)
    for task in tasks:
        by_set[task.set].append(task)
    settings_grid = list(itertools.product(*GRID.values()))
    rows: dict[tuple[float, ...], list[tuple[float, float, int, int]]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/tune.db",
            settings=load_settings(cwd=Path(tmp), environ={}),
            embedder=create_embedder("local"),
        )
        try:
            await memoir.embedder.ensure_loaded()
            for set_name, set_tasks in sorted(by_set.items()):
                root = (ds.PUBLIC / set_name).resolve()
                service = RulesService(memoir.context, cwd=root)
                await service.upsert_markdown(
                    [str(root)], scope=set_name, allowed_roots=[str(root)]
                )
                for floor, ratio, weight, lexical in settings_grid:
                    service_module._GATE = RelevanceGate(floor=floor, ratio=ratio)
                    service_module._RELEVANCE_WEIGHT = weight
                    relevance_module.LEXICAL_WEIGHT = lexical
                    for task in set_tasks:
                        answer = await service.query_directives(
                            task.task, scope=set_name, token_budget=budget
                        )
                        chosen = [
                            Candidate(
                                uid=d.directive_id,
                                rule_id=d.rule_id,
                                file=_relative(d.source_path, root),
                                line_start=d.line_start,
                                line_end=d.line_end,
                                text=d.text,
                            )
                            for d in answer.directives
                        ]
                        found = sum(
                            1 for lab in task.labels if any(matches(c, lab) for c in chosen)
                        )
                        useful = sum(
                            1 for c in chosen if any(matches(c, lab) for lab in task.labels)
                        )
                        rows[(floor, ratio, weight, lexical)].append(
                            (
                                found / len(task.labels),
                                useful / len(chosen) if chosen else 0.0,
                                answer.diagnostics.tokens_used,
                                len(chosen),
                            )
                        )
        finally:
            await memoir.close()
    print("| floor | ratio | weight | lexical | recall | precision | tokens | returned |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    ranked = sorted(rows.items(), key=lambda kv: -statistics.mean(r[0] for r in kv[1]))
    for (floor, ratio, weight, lexical), results in ranked:
        recall = statistics.mean(r[0] for r in results)
        precision = statistics.mean(r[1] for r in results)
        tokens = statistics.mean(r[2] for r in results)
        returned = statistics.mean(r[3] for r in results)
        print(
            f"| {floor} | {ratio} | {weight} | {lexical} | {recall:.3f} | {precision:.3f} | "
            f"{tokens:.0f} | {returned:.1f} |"
        )
    _ = run_dev  # imported for its path setup and matching rules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=900)
    parser.add_argument("--sets", default=None)
    args = parser.parse_args()
    sets = args.sets.split(",") if args.sets else ds.set_names()
    anyio.run(_run, args.budget, sets)


if __name__ == "__main__":
    main()
