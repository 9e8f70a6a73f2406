"""The spec's synthetic memory tasks, with and without memory, and the parameter sweeps.

    .venv/bin/python bench/memory_eval/run_eval.py [--embedder local|hash:384] [--no-sweeps]

Each of the ~20 tasks of ``tasks.json`` (preferences that change, recurring meetings that move,
multi-step goals) gets its own space holding 20 distractor memories and the task's turns,
remembered in time order at their day offsets (so near-duplicates merge and updated facts
supersede older ones through the real write path). Then the question is asked at "now".

A deterministic offline reader answers from a context: the context line sharing the most
content words with the question (ties: the best-ranked line; for the chronological history,
the most recent). An answer is correct when its line holds an expected phrase and no stale one.
Contexts compared in the same run:

- ``no memory``: the question alone (what a model without memory sees);
- ``full history``: every remembered turn, oldest first (no ranking, no supersession);
- ``last 8 turns``: the most recent eight;
- ``BM25 top-N``: the lexical arm alone, top 12;
- ``memoir recall``: hybrid + RRF + tri-score + MMR within a 600-token budget, with the
  defaults and with the spec's plain sum (no relevance gate).

Also reported: the context contains the answer without a contradicting stale value, and the
mean context size in tokens (accuracy and brevity, as the spec asks). The sweeps vary one
parameter at a time around the defaults (alpha, beta, gamma, tau, RRF k, N).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.llm.keyphrases import word_stems  # noqa: E402
from memory_core.memories.service import MemoryService  # noqa: E402
from memory_core.retrieval.rewrite import rewrite_query  # noqa: E402
from memory_core.service import Memoir  # noqa: E402
from memory_core.storage.ports import LexicalQuery  # noqa: E402

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TASKS = json.loads((Path(__file__).parent / "tasks.json").read_text(encoding="utf-8"))


def read_answer(question: str, lines: list[str], *, prefer_last: bool = False) -> str:
    """The line sharing the most question content words (deterministic)."""
    wanted = set(word_stems(question))
    best, best_score = "", 0
    ordered = list(reversed(lines)) if prefer_last else lines
    for line in ordered:
        score = len(wanted & set(word_stems(line)))
        if score > best_score:
            best, best_score = line, score
    return best


def correct(text: str, task: dict[str, Any]) -> bool:
    low = text.lower()
    return any(e in low for e in task["expected"]) and not any(s in low for s in task["stale"])


def context_lines(context: str) -> list[str]:
    return [line[2:] for line in context.splitlines() if line.startswith("- ")]


async def populate(memoir: Memoir, rng: random.Random) -> dict[str, list[tuple[datetime, str]]]:
    history: dict[str, list[tuple[datetime, str]]] = {}
    for task in TASKS["tasks"]:
        events: list[tuple[datetime, dict[str, Any]]] = [
            (NOW - timedelta(days=rng.uniform(1, 90)), {"text": t}) for t in TASKS["distractors"]
        ]
        events += [(NOW - timedelta(days=t["days"]), t) for t in task["turns"]]
        events.sort(key=lambda e: e[0])
        for when, turn in events:
            await memoir.memories.remember(
                turn["text"], space=task["id"], created_at=when, now=when,
                manually_saved=bool(turn.get("saved")), pin=bool(turn.get("pin")),
            )  # fmt: skip
        history[task["id"]] = [(when, turn["text"]) for when, turn in events]
    await memoir.memories.backfill()
    return history


def _service(memoir: Memoir, **memories: Any) -> MemoryService:
    settings = memoir.settings.model_copy(
        update={"memories": memoir.settings.memories.model_copy(update=memories)}
    )
    return MemoryService(replace(memoir.context, settings=settings))


async def run_memoir(
    service: MemoryService, memoir: Memoir, **recall: Any
) -> tuple[float, float, float]:
    answered = in_context = tokens = 0.0
    for task in TASKS["tasks"]:
        result = await service.recall(task["question"], space=task["id"], now=NOW, **recall)
        lines = context_lines(result.context)
        answered += correct(read_answer(task["question"], lines), task)
        joined = result.context.lower()
        in_context += any(e in joined for e in task["expected"]) and not any(
            s in joined for s in task["stale"]
        )
        tokens += result.used_tokens
    n = len(TASKS["tasks"])
    return answered / n, in_context / n, tokens / n


async def run_baselines(
    memoir: Memoir, history: dict[str, list[tuple[datetime, str]]]
) -> list[tuple[str, float, float, float]]:
    rows = []
    n = len(TASKS["tasks"])
    count = memoir.tokens.count
    for name, pick, last in (
        ("no memory", lambda h: [], False),
        ("full history (chronological)", lambda h: [t for _, t in h], True),
        ("last 8 turns", lambda h: [t for _, t in h][-8:], True),
    ):
        answered = in_context = tokens = 0.0
        for task in TASKS["tasks"]:
            lines = pick(history[task["id"]])
            answered += correct(read_answer(task["question"], lines, prefer_last=last), task)
            joined = "\n".join(lines).lower()
            in_context += any(e in joined for e in task["expected"]) and not any(
                s in joined for s in task["stale"]
            )
            tokens += count("\n".join(f"- {line}" for line in lines)) if lines else 0
        rows.append((name, answered / n, in_context / n, tokens / n))
    answered = in_context = tokens = 0.0
    for task in TASKS["tasks"]:
        scope = memoir.memories.space(task["id"]).scope
        terms = rewrite_query(task["question"]).terms

        def search(tx: Any, s: Any = scope, t: Any = terms) -> list[str]:
            hits = tx.lexical.search(LexicalQuery(t, "OR"), s, kinds=("memory",), limit=12)
            items = tx.items.get([h.item_id for h in hits])
            return [items[h.item_id].text for h in hits if h.item_id in items]

        lines = await memoir.store.read(search)
        answered += correct(read_answer(task["question"], lines), task)
        joined = "\n".join(lines).lower()
        in_context += any(e in joined for e in task["expected"]) and not any(
            s in joined for s in task["stale"]
        )
        tokens += count("\n".join(f"- {line}" for line in lines)) if lines else 0
    rows.append(
        ("BM25 top-12 (raw FTS5, no supersession)", answered / n, in_context / n, tokens / n)
    )
    return rows


SWEEPS: dict[str, list[Any]] = {
    "alpha": [0.0, 0.5, 1.0, 2.0],
    "beta": [0.0, 0.5, 1.0, 2.0],
    "gamma": [0.0, 0.5, 1.0, 2.0],
    "tau_days": [1.0, 3.0, 7.0, 14.0, 30.0],
    "rrf_k": [10, 30, 60, 100],
    "top_n": [4, 8, 12, 16],
    "relevance_gate": [0.0, 0.3, 0.5, 0.7, 0.8, 0.9],
}


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--no-sweeps", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings({"memories": {"retention_days": 0}}, cwd=Path(tmp), environ={})
        memoir = await Memoir.open(
            f"sqlite:///{Path(tmp) / 'eval.db'}",
            settings=settings,
            embedder=create_embedder(args.embedder),
        )
        await memoir.embedder.ensure_loaded()
        history = await populate(memoir, random.Random(5))
        print(f"{len(TASKS['tasks'])} tasks, embedder {memoir.embedder.embedder_id}\n")
        print("| context | answer accuracy | answer in context, no stale value | mean tokens |")
        print("| --- | --- | --- | --- |")
        for name, acc, ctx, tok in await run_baselines(memoir, history):
            print(f"| {name} | {acc:.2f} | {ctx:.2f} | {tok:.0f} |")
        acc, ctx, tok = await run_memoir(
            _service(memoir, relevance_gate=0.0, mmr_lambda=0.7), memoir
        )
        print(
            f"| memoir recall (spec's plain sum, no gate, lambda 0.7: the old defaults) | {acc:.2f} | {ctx:.2f} | {tok:.0f} |"
        )
        acc, ctx, tok = await run_memoir(_service(memoir), memoir)
        gate = memoir.settings.memories.relevance_gate
        print(
            f"| memoir recall (defaults, relevance gate {gate}) | {acc:.2f} | {ctx:.2f} | {tok:.0f} |"
        )
        if not args.no_sweeps:
            print("\n| parameter | value | answer accuracy | in context | mean tokens |")
            print("| --- | --- | --- | --- | --- |")
            for name, values in SWEEPS.items():
                for value in values:
                    acc, ctx, tok = await run_memoir(_service(memoir, **{name: value}), memoir)
                    print(f"| {name} | {value} | {acc:.2f} | {ctx:.2f} | {tok:.0f} |", flush=True)
        await memoir.close()


if __name__ == "__main__":
    anyio.run(main)
