"""Tune the ranking stage of ``query_directives`` (``memory_core/rules/rerank.py``) on the
public dev set, leave one repository out, against the baselines over the same parse.

One store, one folder upsert per set (``memoir rules upsert <folder>``, the real local
embedder). Phase 1 replays every task once through ``query_directives`` with today's
ranking and records each candidate the ranking stage saw (its features) and which labels it
matches. Phase 2 re-ranks those candidates offline under a grid of ``RankParams`` and packs
them with memoir's own packer (reason included), so a setting costs no query. Phase 3 is
leave-one-repository-out: for each set, the setting with the best mean recall (ties: precision)
on the OTHER sets; then that setting is installed and the held-out set's tasks are asked
again through the real ``query_directives`` (the figure reported). BM25, dense and hybrid
(RRF) over the same parsed directives are measured in the same run, as in ``run_dev.py``.

Run: ``nice -n 10 .venv/bin/python bench/rules_eval/tune_rank.py [--sets a,b] [--json out]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import pickle
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_dev  # noqa: E402  (sets up sys.path for the repository)
from run_dev import BM25, Candidate, _relative, ds, matches, pack, rrf, tokens  # noqa: E402

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.rules import service as service_module  # noqa: E402
from memory_core.rules.context_block import pack_directives  # noqa: E402
from memory_core.rules.detection import STOPWORDS  # noqa: E402
from memory_core.rules.dictionaries import tokenize  # noqa: E402
from memory_core.rules.models import RankedDirective  # noqa: E402
from memory_core.rules.relevance import RelevanceGate, short_reason  # noqa: E402
from memory_core.rules.rerank import RankParams, rank_candidates  # noqa: E402
from memory_core.rules.scoring import content_stems  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.rules.topics import stem  # noqa: E402
from memory_core.service import Memoir  # noqa: E402
from rules_parser.noise import restatement_key  # noqa: E402

GRID = {
    "fusion_weight": (0.0, 5.0, 10.0, 20.0, 40.0),
    "fusion_k": (10.0, 60.0),
    "heading_weight": (0.0, 2.0, 5.0, 10.0),
    "file_weight": (0.0, 2.0, 5.0, 10.0),
    "length_weight": (0.0, 1.0, 3.0),
    "ratio": (0.0,),
}
Row = tuple[float, float, int, int]  # recall, precision, tokens, returned


@dataclasses.dataclass
class Replay:
    set: str
    task: Any
    header: str
    candidates: list[Any]
    entries: dict[int, RankedDirective]  # item id -> entry with its reason
    hits: dict[int, frozenset[int]]  # item id -> indices of the labels it matches
    restate: dict[int, Any]


def params_of(setting: tuple[float, ...]) -> RankParams:
    values = dict(zip(GRID, setting, strict=True))
    ratio = values.pop("ratio")
    return RankParams(**values, gate=RelevanceGate(floor=0.10, ratio=ratio))


def offline(replay: Replay, params: RankParams, budget: int, count: Any, limit: int) -> Row:
    scored, left = rank_candidates(replay.candidates, params)
    ranked: list[RankedDirective] = []
    seen: set[Any] = set()
    for _, item_id in scored:
        if len(ranked) >= limit:
            break
        key = replay.restate[item_id]
        if key and key in seen:
            continue
        seen.add(key)
        ranked.append(replay.entries[item_id])
    packed = pack_directives(
        ranked, header=replay.header, budget=budget, safety_cap=2000, count=count, left_out=left
    )
    by_uid = {e.directive_id: i for i, e in replay.entries.items()}
    chosen = [by_uid[d.directive_id] for d in packed.selected]
    found: set[int] = set()
    useful = 0
    for item_id in chosen:
        found |= replay.hits[item_id]
        useful += bool(replay.hits[item_id])
    labels = len(replay.task.labels)
    return (
        len(found) / labels,
        useful / len(chosen) if chosen else 0.0,
        packed.tokens_used,
        len(chosen),
    )


def summary(rows: list[Row]) -> dict[str, float]:
    return {
        "recall": round(statistics.mean(r[0] for r in rows), 3),
        "precision": round(statistics.mean(r[1] for r in rows), 3),
        "tokens": round(statistics.mean(r[2] for r in rows), 1),
        "returned": round(statistics.mean(r[3] for r in rows), 1),
    }


def _score_answer(task: Any, answer: Any, root: Path) -> Row:
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
    found = sum(1 for lab in task.labels if any(matches(c, lab) for c in chosen))
    useful = sum(1 for c in chosen if any(matches(c, lab) for lab in task.labels))
    return (
        found / len(task.labels),
        useful / len(chosen) if chosen else 0.0,
        answer.diagnostics.tokens_used,
        len(chosen),
    )


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    sets = args.sets.split(",") if args.sets else ds.set_names()
    by_set: dict[str, list[Any]] = defaultdict(list)
    for task in ds.load_tasks():
        if task.set in sets:
            by_set[task.set].append(task)
    budget = args.budget
    captured: dict[str, Any] = {}
    real_rank = service_module.rank_candidates
    real_header = service_module.render_header

    def capture_rank(candidates: Any, params: Any = None) -> Any:
        captured["candidates"] = list(candidates)
        return real_rank(candidates, params)

    def capture_header(context: Any) -> str:
        captured["header"] = out = real_header(context)
        return out

    service_module.rank_candidates = capture_rank  # type: ignore[assignment]
    service_module.render_header = capture_header  # type: ignore[assignment]
    replays: dict[str, list[Replay]] = defaultdict(list)
    methods: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    before = service_module._RANK
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/tune.db",
            settings=load_settings(
                cwd=Path(tmp),
                environ={"MEMOIR_RULES__CANDIDATE_K": str(args.candidate_k)}
                if args.candidate_k
                else {},
            ),
            embedder=create_embedder("local"),
        )
        try:
            await memoir.embedder.ensure_loaded()
            count = memoir.tokens.count
            services: dict[str, tuple[RulesService, Path]] = {}
            for set_name in sorted(by_set):
                root = (ds.PUBLIC / set_name).resolve()
                service = RulesService(memoir.context, cwd=root)
                services[set_name] = (service, root)
                await service.upsert_markdown(
                    [str(root)], scope=set_name, allowed_roots=[str(root)]
                )
                index = await service._index(set_name)
                limit = service._settings.max_items
                pool = await run_dev._candidates(service, set_name, root)
                bm25 = BM25([tokens(" ".join((c.text, *c.section))) for c in pool])
                vectors = await run_dev._dense_vectors(memoir, pool)
                for task in by_set[set_name]:
                    service_module._RANK = before
                    answer = await service.query_directives(
                        task.task, scope=set_name, token_budget=budget
                    )
                    methods["memoir:before"][set_name].append(_score_answer(task, answer, root))
                    task_stems = content_stems(task.task)
                    entries: dict[int, RankedDirective] = {}
                    hits: dict[int, frozenset[int]] = {}
                    restate: dict[int, Any] = {}
                    for c in captured["candidates"]:
                        d = index.directives[c.item_id]
                        cand = Candidate(
                            uid=d.uid,
                            rule_id=d.rule_id,
                            file=_relative(d.uri, root),
                            line_start=d.line_start,
                            line_end=d.line_end,
                            text=d.statement,
                        )
                        hits[c.item_id] = frozenset(
                            i for i, lab in enumerate(task.labels) if matches(cand, lab)
                        )
                        restate[c.item_id] = restatement_key(d.statement)
                        reason = short_reason(
                            shared_words=(
                                w
                                for w in dict.fromkeys(tokenize(d.statement))
                                if w not in STOPWORDS and len(w) > 2 and stem(w) in task_stems
                            ),
                            condition=None,
                            authority_topics=(),
                            topics=(),
                            semantic=c.semantic or None,
                        )
                        entries[c.item_id] = run_dev._ranked(cand).model_copy(
                            update={
                                "reason": reason,
                                "severity": d.severity,
                                "polarity": d.polarity,
                                "rule_title": index.rules[d.rule_id].title
                                if d.rule_id in index.rules
                                else None,
                            }
                        )
                    replays[set_name].append(
                        Replay(
                            set_name,
                            task,
                            captured["header"],
                            captured["candidates"],
                            entries,
                            hits,
                            restate,
                        )
                    )
                    query_tokens = tokens(task.task)
                    query = await memoir.embedder.embed_query(task.task)
                    query = query / (np.linalg.norm(query) or 1)
                    lexical_scores = bm25.scores(query_tokens)
                    lexical = [int(i) for i in np.argsort(-lexical_scores, kind="stable")]
                    lexical = [i for i in lexical if lexical_scores[i] > 0] or lexical
                    semantic = [int(i) for i in np.argsort(-(vectors @ query), kind="stable")]
                    for method, order in (
                        ("bm25", lexical),
                        ("dense", semantic),
                        ("hybrid", rrf(lexical, semantic)),
                    ):
                        chosen, used, _ = pack(order, pool, budget, count)
                        found = sum(
                            1 for lab in task.labels if any(matches(c, lab) for c in chosen)
                        )
                        useful = sum(
                            1 for c in chosen if any(matches(c, lab) for lab in task.labels)
                        )
                        methods[method][set_name].append(
                            (
                                found / len(task.labels),
                                useful / len(chosen) if chosen else 0.0,
                                used,
                                len(chosen),
                            )
                        )
                print(f"{set_name}: replayed {len(by_set[set_name])} tasks", file=sys.stderr)
            if args.save:
                with args.save.open("wb") as fh:
                    pickle.dump((dict(replays), {m: dict(v) for m, v in methods.items()}), fh)
                if args.replay_only:
                    return {}
            # Phase 2: offline grid.
            grid = list(itertools.product(*GRID.values()))
            offline_rows: dict[tuple[float, ...], dict[str, list[Row]]] = {}
            for setting in grid:
                params = params_of(setting)
                offline_rows[setting] = {
                    name: [offline(r, params, budget, count, limit) for r in rs]
                    for name, rs in replays.items()
                }
            print(f"offline grid: {len(grid)} settings", file=sys.stderr)

            def pooled(setting: tuple[float, ...], skip: str | None = None) -> list[Row]:
                return [r for n, rs in offline_rows[setting].items() if n != skip for r in rs]

            def objective(rows: list[Row]) -> tuple[float, float]:
                return (
                    round(statistics.mean(r[0] for r in rows), 4),
                    round(statistics.mean(r[1] for r in rows), 4),
                )

            ranked = sorted(grid, key=lambda s: objective(pooled(s)), reverse=True)
            print("\n| " + " | ".join(GRID) + " | recall | precision | tokens | returned |")
            print("|" + " --- |" * (len(GRID) + 4))
            for setting in ranked[: args.top]:
                s = summary(pooled(setting))
                print(
                    "| "
                    + " | ".join(f"{v:g}" for v in setting)
                    + f" | {s['recall']:.3f} | {s['precision']:.3f} | {s['tokens']:.0f} | "
                    f"{s['returned']:.1f} |"
                )
            base_setting = tuple({**{k: 0.0 for k in GRID}, "fusion_k": 60.0}[k] for k in GRID)
            if base_setting in offline_rows:
                s = summary(pooled(base_setting))
                print(f"offline today's order: {s}")
            # Phase 3: leave one repository out, measured through the real query path.
            chosen_settings: dict[str, tuple[float, ...]] = {}
            for set_name in sorted(by_set):
                best = max(grid, key=lambda s: objective(pooled(s, skip=set_name)))
                chosen_settings[set_name] = best
                service, root = services[set_name]
                service_module._RANK = params_of(best)
                for task in by_set[set_name]:
                    answer = await service.query_directives(
                        task.task, scope=set_name, token_budget=budget
                    )
                    methods["memoir:after"][set_name].append(_score_answer(task, answer, root))
                methods["memoir:after (offline)"][set_name] = offline_rows[best][set_name]
            service_module._RANK = before
        finally:
            await memoir.close()
            service_module.rank_candidates = real_rank  # type: ignore[assignment]
            service_module.render_header = real_header  # type: ignore[assignment]
    order = ["memoir:before", "memoir:after", "memoir:after (offline)", "hybrid", "bm25", "dense"]
    print("\n| held-out set | " + " | ".join(order) + " | setting chosen on the others |")
    print("|" + " --- |" * (len(order) + 2))
    for set_name in sorted(by_set):
        cells = [f"{summary(methods[m][set_name])['recall']:.3f}" for m in order]
        setting = ", ".join(
            f"{k}={v:g}" for k, v in zip(GRID, chosen_settings[set_name], strict=True)
        )
        print(f"| {set_name} | " + " | ".join(cells) + f" | {setting} |")
    overall = {m: summary([r for rs in methods[m].values() for r in rs]) for m in order}
    print("\n| method | recall | precision | tokens | returned |\n| --- | --- | --- | --- | --- |")
    for m in order:
        s = overall[m]
        print(
            f"| {m} | {s['recall']:.3f} | {s['precision']:.3f} | {s['tokens']:.0f} | "
            f"{s['returned']:.1f} |"
        )
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return {
        "budget": budget,
        "grid": GRID,
        "overall": overall,
        "per_set": {m: {n: summary(rs) for n, rs in methods[m].items()} for m in order},
        "chosen": {n: dict(zip(GRID, s, strict=True)) for n, s in chosen_settings.items()},
        "top_pooled": [
            dict(zip(GRID, s, strict=True)) | summary(pooled(s)) for s in ranked[: args.top]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=900)
    parser.add_argument("--sets", default=None)
    parser.add_argument("--top", type=int, default=15, help="pooled settings to print")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--candidate-k", type=int, default=None, help="rules.candidate_k")
    parser.add_argument("--replay-only", action="store_true", help="stop after --save")
    parser.add_argument("--save", type=Path, default=None, help="pickle the replays here")
    parser.add_argument("--grid", type=Path, default=None, help="JSON overriding GRID entries")
    args = parser.parse_args()
    if args.grid:
        GRID.update({k: tuple(v) for k, v in json.loads(args.grid.read_text()).items()})
    out = anyio.run(_run, args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
