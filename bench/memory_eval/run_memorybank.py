"""Turn-level retrieval on a public long-conversation benchmark: MemoryBank (English).

    .venv/bin/python bench/memory_eval/run_memorybank.py [--embedder local|hash:384]

MemoryBank (Zhong et al., AAAI 2024; MIT) holds 15 users' ten days of conversation with an AI
companion (1,132 messages) and 100 probing questions. ``memorybank/evidence_labels.json`` marks,
for each question, the turns that hold its answer (see SOURCES.md for how). Each user is one
memoir space; every message is remembered (role, the day as ``created_at``, its turn id as a
source id) through the real write path, then each question is asked "the next day".

Ranked turns are scored by recall@5 / @10 (share of the evidence turns found; a merged
near-duplicate counts for every turn in its source ids) and hit@5 / @10 (at least one found),
for, in the same run and on the same texts:

- BM25: a raw SQLite FTS5 table (porter stemmer), the question's words OR-ed;
- dense: cosine between the question and message embeddings (same embedder), exact;
- memoir hybrid: the engine's two arms fused with RRF k = 60 (no re-ranking);
- memoir recall: the full pipeline (tri-score, MMR, supersession) with the spec's default
  weights (alpha = beta = gamma = 1, lambda 0.7) and with relevance-heavy variants.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.kinds import MEMORY  # noqa: E402
from memory_core.memories.service import MemoryService  # noqa: E402
from memory_core.retrieval.engine import SearchRequest  # noqa: E402
from memory_core.retrieval.fusion import rrf  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

DATA = Path(__file__).parent / "memorybank"
KS = (5, 10)
# (label, memories settings) of the recall variants.
VARIANTS: list[tuple[str, dict[str, float]]] = [
    (
        "memoir recall, spec sum (a=b=g=1, no gate, lambda 0.7)",
        {"relevance_gate": 0.0, "mmr_lambda": 0.7},
    ),
    (
        "memoir recall, a=1 b=0.25 g=0.25, no gate, lambda 0.7",
        {"relevance_gate": 0.0, "beta": 0.25, "gamma": 0.25, "mmr_lambda": 0.7},
    ),
    ("no gate, lambda 0.85", {"relevance_gate": 0.0, "mmr_lambda": 0.85}),
    ("gate 0.7, lambda 0.7", {"relevance_gate": 0.7, "mmr_lambda": 0.7}),
    ("gate 0.3, lambda 0.85", {"relevance_gate": 0.3, "mmr_lambda": 0.85}),
    ("gate 0.5, lambda 0.85", {"relevance_gate": 0.5, "mmr_lambda": 0.85}),
    ("gate 0.7, lambda 0.85", {"relevance_gate": 0.7, "mmr_lambda": 0.85}),
    ("gate 0.8, lambda 0.85", {"relevance_gate": 0.8, "mmr_lambda": 0.85}),
    ("gate 0.5, lambda 1", {"relevance_gate": 0.5, "mmr_lambda": 1.0}),
    ("gate 0.7, lambda 1", {"relevance_gate": 0.7, "mmr_lambda": 1.0}),
    ("gate 0.9, lambda 1", {"relevance_gate": 0.9, "mmr_lambda": 1.0}),
    ("memoir recall, defaults (a=b=g=1, gate 0.8, lambda 0.85)", {}),
    (
        "memoir recall, relevance only (b=g=0, lambda 1)",
        {"beta": 0.0, "gamma": 0.0, "mmr_lambda": 1.0},
    ),
]


def load() -> tuple[dict[str, list[tuple[str, str, str]]], list[tuple[str, str, list[str]]]]:
    raw = json.loads((DATA / "memory_bank_en.json").read_text(encoding="utf-8"))
    turns: dict[str, list[tuple[str, str, str]]] = {}
    for key, value in raw.items():
        user = key.strip()
        rows = []
        for date, exchanges in value["history"].items():
            for i, exchange in enumerate(exchanges):
                rows.append((f"{date}#{i}q", "user", exchange["query"]))
                rows.append((f"{date}#{i}r", "assistant", exchange["response"]))
        turns[user] = rows
    labels = json.loads((DATA / "evidence_labels.json").read_text(encoding="utf-8"))["labels"]
    questions: list[tuple[str, str, list[str]]] = []
    for line in (DATA / "probing_questions_en.jsonl").read_text(encoding="utf-8").splitlines():
        for user, asked in json.loads(line).items():
            for i, question in enumerate(asked):
                evidence = labels[f"{user.strip()}#{i}"]
                if evidence:
                    questions.append((user.strip(), question, evidence))
    return turns, questions


def scores(ranked: list[set[str]], evidence: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    wanted = set(evidence)
    for k in KS:
        found: set[str] = set().union(*ranked[:k]) & wanted if ranked else set()
        out[f"recall@{k}"] = len(found) / len(wanted)
        out[f"hit@{k}"] = 1.0 if found else 0.0
    return out


def when(turn_id: str) -> datetime:
    date, rest = turn_id.split("#")
    index = int(rest[:-1]) * 2 + (1 if rest.endswith("r") else 0)
    return datetime.fromisoformat(date).replace(tzinfo=UTC) + timedelta(hours=20, minutes=index)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="local")
    args = parser.parse_args()
    turns, questions = load()
    totals: dict[str, dict[str, float]] = {}

    def add(method: str, values: dict[str, float]) -> None:
        bucket = totals.setdefault(method, {})
        for key, value in values.items():
            bucket[key] = bucket.get(key, 0.0) + value

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings({"memories": {"retention_days": 0}}, cwd=Path(tmp), environ={})
        memoir = await Memoir.open(
            f"sqlite:///{Path(tmp) / 'mb.db'}",
            settings=settings,
            embedder=create_embedder(args.embedder),
        )
        await memoir.embedder.ensure_loaded()
        merged = 0
        for user, rows in turns.items():
            for turn_id, role, text in rows:
                result = await memoir.memories.remember(
                    text, space="memorybank", user=user, role=role, source_ids=[turn_id],
                    created_at=when(turn_id), now=when(turn_id), embed_now=False, on_conflict="keep",
                )  # fmt: skip
                merged += result.status == "merged"
        await memoir.memories.backfill()
        vectors = {
            u: await memoir.embedder.embed_documents([t for _, _, t in rows])
            for u, rows in turns.items()
        }
        services = {}
        for label, overrides in VARIANTS:
            tuned = memoir.settings.memories.model_copy(update=overrides)
            ctx = memoir.context
            services[label] = MemoryService(
                type(ctx)(
                    memoir.settings.model_copy(update={"memories": tuned}),
                    ctx.store,
                    ctx.embedder,
                    ctx.tokens,
                )
            )
        for user, question, evidence in questions:
            rows = turns[user]
            # BM25: raw FTS5.
            conn = sqlite3.connect(":memory:")
            conn.execute("CREATE VIRTUAL TABLE f USING fts5(t, tokenize='porter')")
            conn.executemany(
                "INSERT INTO f(rowid, t) VALUES (?, ?)",
                [(i, t) for i, (_, _, t) in enumerate(rows)],
            )
            words = " OR ".join(f'"{w}"' for w in re.findall(r"[A-Za-z0-9]{2,}", question))
            bm25 = [
                rows[r[0]][0]
                for r in conn.execute(
                    "SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank LIMIT 10", (words,)
                )
            ]
            add("BM25 (raw FTS5)", scores([{t} for t in bm25], evidence))
            # Dense: exact cosine.
            query = await memoir.embedder.embed_query(question)
            order = np.argsort(-(vectors[user] @ query))[:10]
            add("dense (exact cosine)", scores([{rows[i][0]} for i in order], evidence))
            # memoir: the engine's arms fused with RRF (no re-ranking).
            pair = memoir.memories.space("memorybank", user)
            arms = await memoir.context.engine.arms(
                SearchRequest(text=question, scope=pair.scope, kinds=(MEMORY,), k=50, fetch_k=50)
            )
            fused = rrf({"lexical": arms.lexical, "semantic": arms.semantic}, k=60)[:10]
            items = await memoir.store.read(
                lambda tx, f=fused: tx.items.get([h.item_id for h in f])
            )
            add(
                "memoir hybrid (RRF k=60)",
                scores(
                    [
                        set(items[h.item_id].metadata.get("source_ids", []))
                        for h in fused
                        if h.item_id in items
                    ],
                    evidence,
                ),
            )
            # memoir: the full recall pipeline, the day after the last session.
            for label, _ in VARIANTS:
                service = services[label]
                recalled = await service.recall(
                    question, space="memorybank", user=user, k=10, budget_tokens=100_000,
                    now=datetime(2023, 5, 7, 12, tzinfo=UTC),
                )  # fmt: skip
                add(label, scores([set(h.source_ids) for h in recalled.results], evidence))
        await memoir.close()
    n = len(questions)
    print(
        f"MemoryBank (en): {sum(len(r) for r in turns.values())} messages, {n} questions with evidence, "
        f"{merged} messages merged as near-duplicates, embedder {args.embedder}\n"
    )
    print("| method | recall@5 | recall@10 | hit@5 | hit@10 |")
    print("| --- | --- | --- | --- | --- |")
    for method, bucket in totals.items():
        print(
            f"| {method} | {bucket['recall@5'] / n:.3f} | {bucket['recall@10'] / n:.3f} | "
            f"{bucket['hit@5'] / n:.3f} | {bucket['hit@10'] / n:.3f} |"
        )


if __name__ == "__main__":
    anyio.run(main)
