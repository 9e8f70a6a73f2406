"""Tune the relevance gate of ``query_directives`` on the public dev set (memoir:folder).

Ingests each set's folder once (``memoir rules upsert <folder>``, the real local embedder),
then replays every task under a grid of gate settings (floor, ratio, candidates per arm) and
prints recall, precision, tokens and directives returned per setting, macro over tasks. Then
leave-one-repository-out: for each set, the setting with the best objective (recall +
precision, macro over tasks) on the OTHER sets, and its numbers on the held-out set, so the
chosen constants are not judged on the tasks they were tuned on. The chosen setting goes into
``memory_core/rules/service.py`` (gate) and ``memory_core/config.py`` (``candidate_k``).

Run: ``.venv/bin/python bench/rules_eval/tune_gate.py [--budget 900] [--sets a,b]``.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from memory_core.rules import service as service_module  # noqa: E402
from memory_core.rules.relevance import RelevanceGate  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

GRID = {
    "floor": (0.1, 0.3, 0.45),
    "ratio": (0.0, 0.7, 0.85),
    "candidate_k": (30, 60),
}
Setting = tuple[float, ...]
Row = tuple[float, float, int, int]


def objective(results: list[Row]) -> float:
    return statistics.mean(r[0] + r[1] for r in results)


EMBED_TEXTS = {
    # memoir's own: "title. heading. statement. detail"
    "full": None,
    "statement": lambda document, directive: directive.text,
    "heading": lambda document, directive: ". ".join(
        filter(None, (*directive.section_path[-1:], directive.text))
    ),
}


async def _run(budget: int, sets: list[str]) -> None:
    tasks = [t for t in ds.load_tasks() if t.set in sets]
    by_set: dict[str, list[Any]] = defaultdict(list)
    for task in tasks:
        by_set[task.set].append(task)
    settings_grid = list(itertools.product(*GRID.values()))
    rows: dict[Setting, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
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
                base = service._settings
                base_rank = service_module._RANK
                for setting in settings_grid:
                    floor, ratio, candidate_k = setting
                    service_module._RANK = dataclasses.replace(
                        base_rank, gate=RelevanceGate(floor=floor, ratio=ratio)
                    )
                    service._settings = base.model_copy(update={"candidate_k": int(candidate_k)})
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
                        rows[setting][set_name].append(
                            (
                                found / len(task.labels),
                                useful / len(chosen) if chosen else 0.0,
                                answer.diagnostics.tokens_used,
                                len(chosen),
                            )
                        )
        finally:
            await memoir.close()
    print("| floor | ratio | candidate_k | recall | precision | tokens | returned | objective |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")

    def flat(setting: Setting, skip: str | None = None) -> list[Row]:
        return [r for name, rs in rows[setting].items() if name != skip for r in rs]

    ranked = sorted(rows, key=lambda s: -objective(flat(s)))
    for setting in ranked:
        print(f"| {' | '.join(str(v) for v in setting)} | {_summary(flat(setting))} |")
    print("\nLeave one repository out (setting chosen on the other sets):\n")
    print("| held-out set | floor | ratio | candidate_k | recall | precision | tokens | returned |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    held: list[Row] = []
    for name in sorted(by_set):
        best = max(rows, key=lambda s: objective(flat(s, skip=name)))
        results = rows[best][name]
        held += results
        print(f"| {name} | {' | '.join(str(v) for v in best)} | {_summary(results, False)} |")
    print(f"| ALL (held-out) | | | | {_summary(held, False)} |")
    _ = run_dev  # imported for its path setup and matching rules


def _summary(results: list[Row], with_objective: bool = True) -> str:
    recall = statistics.mean(r[0] for r in results)
    precision = statistics.mean(r[1] for r in results)
    tokens = statistics.mean(r[2] for r in results)
    returned = statistics.mean(r[3] for r in results)
    out = f"{recall:.3f} | {precision:.3f} | {tokens:.0f} | {returned:.1f}"
    return out + (f" | {objective(results):.3f}" if with_objective else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=900)
    parser.add_argument("--sets", default=None)
    parser.add_argument(
        "--current", action="store_true", help="only today's gate (floor 0.1, ratio 0, k 30)"
    )
    parser.add_argument(
        "--embed-text", choices=sorted(EMBED_TEXTS), default="full", help="what is embedded"
    )
    args = parser.parse_args()
    if args.current:
        GRID.update(floor=(0.1,), ratio=(0.0,), candidate_k=(30,))
    if EMBED_TEXTS[args.embed_text] is not None:
        from memory_core.rules import graph

        graph.embed_text = EMBED_TEXTS[args.embed_text]  # type: ignore[assignment]
    sets = args.sets.split(",") if args.sets else ds.set_names()
    anyio.run(_run, args.budget, sets)


if __name__ == "__main__":
    main()
