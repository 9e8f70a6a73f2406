"""Variants of the learned stopping rule, offline, leave one repository out.

Reads the replays ``tune_stop.py --dump FILE`` pickled (each task's candidates, the labels each
matches, the budget's cut) and, for each held-out set, fits on the other sets only:

- ``top-k``: a fixed number of directives (what ``max_items`` does);
- ``stop``: ``stop_model.py``'s features, stop at the first directive below the threshold;
- ``stop+task``: the same plus task-level features (best relevance and similarity of the task's
  candidates, share of candidates the lexical arm found) and rank interactions;
- ``skip`` / ``skip+task``: keep every directive whose probability clears the threshold
  (skips, which the spec's packing order does not allow; measured as a bound).

Offline = the list cut where the rule stops or where the budget cut it, whichever is first
(restatements and forced MUSTs ignored); on the 2026-11-26 run it reproduced the real query
path within 0.007 recall (RESULTS.md).

Run: ``.venv/bin/python bench/rules_eval/stop_variants.py FILE``.
"""

from __future__ import annotations

import pickle
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tune_stop  # noqa: E402
from stop_model import stop_features  # noqa: E402
from tune_rank import fit  # noqa: E402

THRESHOLDS = (0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1)
Predict = Callable[[np.ndarray], np.ndarray]


def _features(replay: Any, params: Any, task_level: bool) -> tuple[np.ndarray, np.ndarray]:
    scores, order = tune_stop.ranked(replay, params)
    x = np.array(stop_features(scores, order))
    if task_level:
        n = len(order)
        rank = x[:, 0:1]
        x = np.hstack(
            [
                x,
                np.full((n, 1), max(c.relevance for c in order)),
                np.full((n, 1), max(c.semantic for c in order)),
                np.full((n, 1), sum(c.lexical_rank is not None for c in order) / n),
                rank**2,
                rank * x[:, 1:2],
                rank * x[:, 4:5],
                x[:, 1:2] ** 2,
            ]
        )
    return x, np.array([1.0 if replay.hits.get(c.item_id) else 0.0 for c in order])


def _logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> Predict:
    model = tune_stop.fit_stop(x, y, l2=l2)
    mean, scale = np.array(model.mean), np.array(model.scale)
    w, b = np.array(model.weights), model.bias
    return lambda z: 1 / (1 + np.exp(-np.clip(((z - mean) / scale) @ w + b, -60, 60)))


def _score(replay: Any, params: Any, keep: Sequence[int]) -> tuple[float, float, float]:
    _, order = tune_stop.ranked(replay, params)
    chosen = [order[i] for i in keep]
    found = set().union(*(replay.hits.get(c.item_id, frozenset()) for c in chosen))
    useful = sum(1 for c in chosen if replay.hits.get(c.item_id))
    return len(found) / replay.n_labels, useful / len(chosen) if chosen else 0.0, len(chosen)


def main() -> None:
    # tune_stop.py ran as __main__, so the pickle names its Replay class "__main__.Replay".
    sys.modules["__main__"].Replay = tune_stop.Replay  # type: ignore[attr-defined]
    dump = pickle.loads(Path(sys.argv[1]).read_bytes())
    replays, rank_data = dump["replays"], dump["rank_data"]
    sets = sorted(replays)

    def stacked(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        rows = [pair for n in names for pair in rank_data[n]]
        return np.vstack([x for x, _ in rows]), np.concatenate([y for _, y in rows])

    folds = {s: fit(*stacked([n for n in sets if n != s]), l2=0.1, k=10.0) for s in sets}

    def mean(rows: list[tuple[float, float, float]]) -> str:
        r, p, n = (statistics.mean(x[i] for x in rows) for i in range(3))
        return f"{r:.3f} / {p:.3f} / {n:.1f}"

    print("| rule | setting | recall / precision / returned |\n| --- | --- | --- |")
    for k in (3, 6, 9, 12, 16):
        rows = [_score(r, folds[s], range(min(k, r.returned))) for s in sets for r in replays[s]]
        print(f"| top-k | {k} | {mean(rows)} |")
    for task_level in (False, True):
        models: dict[str, Predict] = {}
        for s in sets:
            train = [_features(r, folds[s], task_level) for n in sets if n != s for r in replays[n]]
            models[s] = _logistic(
                np.vstack([x for x, _ in train]), np.concatenate([y for _, y in train])
            )
        for mode in ("stop", "skip"):
            name = mode + ("+task" if task_level else "")
            for t in THRESHOLDS:
                rows = []
                for s in sets:
                    for r in replays[s]:
                        p = models[s](_features(r, folds[s], task_level)[0])
                        if mode == "stop":
                            cut = next((i for i, pi in enumerate(p) if i >= 2 and pi < t), len(p))
                            keep: Sequence[int] = range(min(cut, r.returned))
                        else:
                            keep = [i for i in range(r.returned) if i < 2 or p[i] >= t]
                        rows.append(_score(r, folds[s], keep))
                print(f"| {name} | p < {t:g} | {mean(rows)} |")


if __name__ == "__main__":
    main()
