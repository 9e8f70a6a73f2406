"""Fit and evaluate a learned stopping rule for ``query_directives``, leave one repository out.

The ranking fills the budget (about 21 directives for 1-2 relevant ones). This fits a
calibrated logistic P(relevant) per ranked directive over query-time features
(``stop_model.py``) and stops the ranked list at the first directive below a threshold, by
wrapping ``rank_candidates`` as ``query_directives`` calls it (memoir's code is unchanged; the
answers still go through its real packer).

One store, one folder upsert per set (the real local embedder), all in one run:

1. Every task through ``query_directives`` (shipped ranking, no stop), recording the
   candidates the ranking stage saw, which labels each one matches, and how many directives
   the answer held (the budget's cut).
2. For each held-out set: the ranking weights are fitted on the OTHER sets as in
   ``tune_rank.py`` (``memoir:loo``, the 0.780 figure); the stop model is fitted on the other
   sets' candidates ranked with those weights (never on the held-out set); its threshold is
   chosen on the other sets (offline: the list cut where the model stops or where the budget
   cut it, whichever is first) as the highest threshold whose training recall stays within
   0.02 (``stop:train-0.02``) or 0.05 (``stop:train-0.05``) of no stop. The held-out tasks are
   then asked through the real ``query_directives`` with the fold's weights and stop model, at
   each fixed threshold of ``--thresholds`` and at the chosen ones.
3. ``memoir:shipped`` (today's defaults, in-sample), BM25, dense and hybrid (RRF) over the same
   parsed directives, as in ``run_dev.py``.
4. The model fitted on every set, with the threshold the ``--policy`` chooses on every set,
   written to ``--model-out`` (what ``memory_core/rules/stop_model.json`` holds).

Run: ``nice -n 10 .venv/bin/python bench/rules_eval/tune_stop.py [--json out] [--model-out f]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_dev  # noqa: E402  (sets up sys.path for the repository)
from run_dev import BM25, Candidate, _relative, ds, matches, pack, tokens  # noqa: E402
from stop_model import StopModel, stop_features  # noqa: E402
from tune_rank import (  # noqa: E402
    BEFORE,
    Row,
    _row,
    _score_answer,
    baseline_orders,
    features,
    fit,
    summary,
)

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.rules import rerank  # noqa: E402
from memory_core.rules import service as service_module  # noqa: E402
from memory_core.rules.rerank import RankParams  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

MAX_ITEMS = (6, 9, 12, 16)
GRID = tuple(float(x) for x in np.round(np.geomspace(0.001, 0.5, 60), 4))


@dataclasses.dataclass
class Replay:
    """One task as recorded: its candidates, the labels each matches, the budget's cut."""

    set_name: str
    paraphrased: bool
    n_labels: int
    candidates: list[rerank.Candidate]
    hits: dict[int, frozenset[int]]  # item id -> indexes of the labels it matches
    returned: int  # directives in the answer without a stop (the budget's cut)


def fit_stop(x: np.ndarray, y: np.ndarray, *, l2: float) -> StopModel:
    """Logistic regression by Newton's method, L2 on standardised features, NOT class-balanced
    (the probabilities stay calibrated)."""
    mean, scale = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.r_[np.full(z.shape[1] - 1, l2 * len(y)), 0.0]
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(z @ w, -60, 60)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return StopModel(
        weights=tuple(float(v) for v in w[:-1]),
        bias=float(w[-1]),
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        threshold=0.0,
    )


def ranked(replay: Replay, params: RankParams) -> tuple[list[float], list[rerank.Candidate]]:
    scored, _ = rerank.rank_candidates(replay.candidates, params)
    by_id = {c.item_id: c for c in replay.candidates}
    return [s for s, _ in scored], [by_id[i] for _, i in scored]


def training_rows(replays: Sequence[Replay], params: RankParams) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for r in replays:
        scores, order = ranked(r, params)
        xs += stop_features(scores, order)
        ys += [1.0 if r.hits.get(c.item_id) else 0.0 for c in order]
    return np.array(xs), np.array(ys)


def offline(
    replays: Sequence[Replay], params: RankParams, model: StopModel | None
) -> tuple[float, float, float]:
    """(recall, precision, returned) with the list cut where ``model`` stops or the budget
    cut it, whichever comes first (restatements and forced MUSTs ignored)."""
    recalls, precisions, counts = [], [], []
    for r in replays:
        scores, order = ranked(r, params)
        n = r.returned if model is None else min(r.returned, model.cut(scores, order))
        chosen = order[:n]
        found = set().union(*(r.hits.get(c.item_id, frozenset()) for c in chosen))
        recalls.append(len(found) / r.n_labels)
        precisions.append(
            sum(1 for c in chosen if r.hits.get(c.item_id)) / len(chosen) if chosen else 0.0
        )
        counts.append(len(chosen))
    return statistics.mean(recalls), statistics.mean(precisions), statistics.mean(counts)


def oracle_stop(replays: Sequence[Replay], params: RankParams) -> tuple[float, float, float]:
    """(recall, precision, returned) if each list stopped right after its last relevant
    directive within the budget's cut: the best any stopping rule can do at no recall cost."""
    recalls, precisions, counts = [], [], []
    for r in replays:
        _, order = ranked(r, params)
        order = order[: r.returned]
        last = max((i + 1 for i, c in enumerate(order) if r.hits.get(c.item_id)), default=0)
        chosen = order[:last]
        found = set().union(*(r.hits.get(c.item_id, frozenset()) for c in chosen))
        recalls.append(len(found) / r.n_labels)
        precisions.append(
            sum(1 for c in chosen if r.hits.get(c.item_id)) / len(chosen) if chosen else 0.0
        )
        counts.append(len(chosen))
    return statistics.mean(recalls), statistics.mean(precisions), statistics.mean(counts)


def choose(
    replays: Sequence[Replay], params: RankParams, model: StopModel, allowed_loss: float
) -> float:
    """The highest threshold whose offline recall is within ``allowed_loss`` of no stop."""
    base = offline(replays, params, None)[0]
    best = 0.0
    for t in GRID:
        recall = offline(replays, params, dataclasses.replace(model, threshold=t))[0]
        if recall >= base - allowed_loss:
            best = t
    return best


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    sets = args.sets.split(",") if args.sets else ds.set_names()
    by_set: dict[str, list[Any]] = defaultdict(list)
    for task in ds.load_tasks():
        if task.set in sets:
            by_set[task.set].append(task)
    budget = args.budget
    thresholds = [float(t) for t in args.thresholds.split(",")]
    captured: dict[str, Any] = {}
    real_rank = service_module.rank_candidates

    def capture_rank(candidates: Any, params: Any = None) -> Any:
        captured["candidates"] = list(candidates)
        scored, left_out = real_rank(candidates, params)
        stop: StopModel | None = captured.get("stop")
        if stop is not None and scored:
            by_id = {c.item_id: c for c in captured["candidates"]}
            keep = stop.cut([s for s, _ in scored], [by_id[i] for _, i in scored])
            left_out += len(scored) - keep
            scored = scored[:keep]
        return scored, left_out

    service_module.rank_candidates = capture_rank  # type: ignore[assignment]
    shipped = service_module._RANK
    replays: dict[str, list[Replay]] = defaultdict(list)
    rank_data: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    methods: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    chosen_thresholds: dict[str, dict[str, float]] = defaultdict(dict)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/stop.db",
            settings=load_settings(cwd=Path(tmp), environ={}),
            embedder=create_embedder("local"),
        )
        try:
            await memoir.embedder.ensure_loaded()
            count = memoir.tokens.count
            services: dict[str, tuple[RulesService, Path]] = {}
            for set_name in sorted(by_set):
                root = (ds.PUBLIC / set_name).resolve()
                service = RulesService(memoir.context, cwd=root)
                service._settings = service._settings.model_copy(
                    update={"candidate_k": args.candidate_k}
                )
                services[set_name] = (service, root)
                await service.upsert_markdown(
                    [str(root)], scope=set_name, allowed_roots=[str(root)]
                )
                index = await service._index(Scope.of(set_name))
                pool = await run_dev._candidates(service, set_name, root)
                bm25 = BM25([tokens(" ".join((c.text, *c.section))) for c in pool])
                vectors = await run_dev._dense_vectors(memoir, pool)
                for task in by_set[set_name]:
                    service_module._RANK = shipped
                    answer = await service.query_directives(
                        task.task, scope=set_name, token_budget=budget
                    )
                    methods["memoir:shipped"][set_name].append(_score_answer(task, answer, root))
                    cands = captured["candidates"]
                    hits: dict[int, frozenset[int]] = {}
                    for c in cands:
                        d = index.directives[c.item_id]
                        cand = Candidate(
                            d.uid, d.rule_id, _relative(d.uri, root), d.line_start, d.line_end, ""
                        )
                        found = frozenset(
                            i for i, lab in enumerate(task.labels) if matches(cand, lab)
                        )
                        if found:
                            hits[c.item_id] = found
                    replays[set_name].append(
                        Replay(
                            set_name,
                            task.paraphrased,
                            len(task.labels),
                            cands,
                            hits,
                            len(answer.directives),
                        )
                    )
                    kept, _ = real_rank(cands, BEFORE)
                    by_id = {c.item_id: c for c in cands}
                    kept_c = [by_id[i] for _, i in kept]
                    rank_data[set_name].append(
                        (
                            features(kept_c, args.fusion_k),
                            np.array([1.0 if hits.get(c.item_id) else 0.0 for c in kept_c]),
                        )
                    )
                    query = await memoir.embedder.embed_query(task.task)
                    for method, order in baseline_orders(task.task, query, bm25, vectors):
                        chosen, used, _ = pack(order, pool, budget, count)
                        methods[method][set_name].append(_row(task, chosen, used))
                print(f"{set_name}: {len(by_set[set_name])} tasks replayed", file=sys.stderr)

            def stacked(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
                rows = [pair for n in names for pair in rank_data[n]]
                return np.vstack([x for x, _ in rows]), np.concatenate([y for _, y in rows])

            folds: dict[str, dict[str, Any]] = {}
            for set_name in sorted(by_set):
                others = [n for n in sorted(by_set) if n != set_name]
                params = fit(*stacked(others), l2=args.l2, k=args.fusion_k)
                train = [r for n in others for r in replays[n]]
                model = fit_stop(*training_rows(train, params), l2=args.stop_l2)
                # method -> (stop model or None, max_items or None)
                runs: dict[str, tuple[StopModel | None, int | None]] = {"memoir:loo": (None, None)}
                for t in thresholds:
                    runs[f"stop:p<{t:g}"] = (dataclasses.replace(model, threshold=t), None)
                for loss in (0.02, 0.05):
                    t = choose(train, params, model, loss)
                    chosen_thresholds[f"train-{loss:g}"][set_name] = t
                    runs[f"stop:train-{loss:g}"] = (dataclasses.replace(model, threshold=t), None)
                for n in MAX_ITEMS:
                    runs[f"max_items={n}"] = (None, n)
                service, root = services[set_name]
                service_module._RANK = params
                for method, (stop, max_items) in runs.items():
                    captured["stop"] = stop
                    for task in by_set[set_name]:
                        answer = await service.query_directives(
                            task.task, scope=set_name, token_budget=budget, max_items=max_items
                        )
                        methods[method][set_name].append(_score_answer(task, answer, root))
                captured["stop"] = None
                folds[set_name] = {"weights": model.as_dict()}
                print(f"{set_name}: held out", file=sys.stderr)

            every_params = fit(*stacked(sorted(by_set)), l2=args.l2, k=args.fusion_k)
            everything = [r for n in sorted(by_set) for r in replays[n]]
            every_model = fit_stop(*training_rows(everything, every_params), l2=args.stop_l2)
            policy_loss = {"train-0.02": 0.02, "train-0.05": 0.05}[args.policy]
            every_model = dataclasses.replace(
                every_model,
                threshold=choose(everything, every_params, every_model, policy_loss),
            )
            oracle = oracle_stop(everything, shipped)
            offline_curve = {
                f"p<{t:g}": offline(
                    everything, every_params, dataclasses.replace(every_model, threshold=t)
                )
                for t in thresholds
            }
        finally:
            service_module._RANK = shipped
            captured["stop"] = None
            service_module.rank_candidates = real_rank  # type: ignore[assignment]
            await memoir.close()
    order = [
        "memoir:shipped",
        "memoir:loo",
        *[f"stop:p<{t:g}" for t in thresholds],
        "stop:train-0.02",
        "stop:train-0.05",
        *[f"max_items={n}" for n in MAX_ITEMS],
        "hybrid",
        "dense",
        "bm25",
    ]
    overall = {m: summary([r for rs in methods[m].values() for r in rs]) for m in order}
    print(
        "\n| method | recall | lit | para | precision | tokens | returned |\n"
        "| --- | --- | --- | --- | --- | --- | --- |"
    )
    for m in order:
        s = overall[m]
        print(
            f"| {m} | {s['recall']:.3f} | {s['lit']:.3f} | {s['para']:.3f} | "
            f"{s['precision']:.3f} | {s['tokens']:.0f} | {s['returned']:.1f} |"
        )
    print("\n| held-out set | " + " | ".join(order) + " |")
    print("|" + " --- |" * (len(order) + 1))
    for set_name in sorted(by_set):
        cells = [
            f"{summary(methods[m][set_name])['recall']:.3f}/"
            f"{summary(methods[m][set_name])['precision']:.2f}"
            for m in order
        ]
        print(f"| {set_name} | " + " | ".join(cells) + " |")
    print("\nthresholds chosen on the training folds:")
    for policy, per_set in chosen_thresholds.items():
        print(f"  {policy}: " + ", ".join(f"{n} {t:g}" for n, t in per_set.items()))
    print(
        "\noracle stop (after the last relevant directive within the budget's cut, shipped "
        f"order, offline): recall {oracle[0]:.3f}, precision {oracle[1]:.3f}, "
        f"returned {oracle[2]:.1f}"
    )
    print(f"\nfitted on every set ({args.policy}): threshold {every_model.threshold:g}")
    print(json.dumps(every_model.as_dict()))
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if args.dump:
        with args.dump.open("wb") as f:
            pickle.dump({"replays": dict(replays), "rank_data": dict(rank_data)}, f)
    if args.model_out:
        args.model_out.write_text(
            json.dumps(every_model.as_dict(), indent=1) + "\n", encoding="utf-8"
        )
    return {
        "budget": budget,
        "candidate_k": args.candidate_k,
        "overall": overall,
        "per_set": {m: {n: summary(rs) for n, rs in methods[m].items()} for m in order},
        "chosen_thresholds": chosen_thresholds,
        "folds": folds,
        "fit_all": every_model.as_dict(),
        "offline_in_sample": {k: list(v) for k, v in offline_curve.items()},
        "oracle_stop": list(oracle),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=900)
    parser.add_argument("--sets", default=None)
    parser.add_argument("--candidate-k", type=int, default=60)
    parser.add_argument("--fusion-k", type=float, default=10.0)
    parser.add_argument("--l2", type=float, default=0.1, help="ranking fit (as tune_rank.py)")
    parser.add_argument("--stop-l2", type=float, default=1e-3, help="stop model's L2 per row")
    parser.add_argument("--thresholds", default="0.005,0.01,0.02,0.03,0.05,0.1")
    parser.add_argument("--policy", choices=("train-0.02", "train-0.05"), default="train-0.02")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--model-out", type=Path, default=None)
    parser.add_argument("--dump", type=Path, default=None, help="pickle the replays here")
    args = parser.parse_args()
    out = anyio.run(_run, args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
