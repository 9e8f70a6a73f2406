"""Category and intention operations shared by the memorize and evolve steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memory_core.llm.keyphrases import overlap, word_stems
from memory_core.pipeline.extraction import (
    intention_from,
)
from memory_core.pipeline.llm_calls import (
    CategoryChoices,
    IntentionOut,
)
from memory_core.pipeline.step_context import LLMHandle, StepContext, exact_filter
from memory_core.storage.layer import (
    CategoryRow,
    IntentionRow,
    MemberRow,
)
from memory_core.storage.layer import vectors as vector_math

__all__ = [
    "categorise",
    "intention_for",
    "previous_intention",
    "refresh_categories",
    "store_intention",
]


def _offline_categories(ctx: StepContext, texts: Sequence[str], vectors: np.ndarray) -> list[str]:
    if not texts:
        return []
    cat_vectors = ctx.category_vectors()
    cat_words = [word_stems(f"{c['name']} {c['description']}") for c in ctx.taxonomy]
    cosines = np.asarray(vectors, dtype=np.float32) @ cat_vectors.T
    out = []
    for row, text in enumerate(texts):
        stems = set(word_stems(text))
        scores = [
            float(cosines[row, j]) + 0.5 * overlap(stems, cat_words[j])
            for j in range(len(cat_words))
        ]
        best = max(range(len(scores)), key=lambda j: (scores[j], -j))
        out.append(ctx.taxonomy[best]["key"])
    return out


def categorise(
    ctx: StepContext, llm: LLMHandle, texts: Sequence[str], vectors: np.ndarray
) -> list[str]:
    fallback = _offline_categories(ctx, texts, vectors)
    if llm.offline or not texts:
        return fallback
    keys = {c["key"] for c in ctx.taxonomy}
    out: CategoryChoices = llm.call(
        CategoryChoices, {"taxonomy": ctx.taxonomy, "items": list(texts)}
    )
    chosen = list(fallback)
    for choice in out.choices:
        if 0 <= choice.index < len(chosen) and choice.category_key in keys:
            chosen[choice.index] = choice.category_key
    return chosen


def intention_for(
    llm: LLMHandle, pairs: Sequence[tuple[str, str]], previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    if llm.offline:
        return intention_from(pairs, previous)
    out: IntentionOut = llm.call(
        IntentionOut, {"previous": previous or {}, "items": [t for _, t in pairs]}
    )
    return {
        "goals": out.goals,
        "constraints": out.constraints,
        "progress": out.progress,
        "source_item_ids": [i for i, _ in pairs],
    }


def previous_intention(ctx: StepContext, scope: Mapping[str, str]) -> dict[str, Any] | None:
    rows = ctx.store.latest_intentions(exact_filter(scope))
    if not rows:
        return None
    r = rows[0]
    return {
        "version": r.version,
        "goals": r.goals,
        "constraints": r.constraints,
        "progress": r.progress,
        "source_item_ids": r.source_item_ids,
    }


def refresh_categories(
    ctx: StepContext, scope: Mapping[str, str], keys: Sequence[str] | None, anchors: int
) -> dict[str, int]:
    """Recompute item counts, anchors (items nearest the centroid, by confidence) and
    extractive summaries of the given categories of one scope (all when ``keys`` is None).
    Only the members of those categories are read, so a memorize costs what it touched."""
    wanted = {c["key"] for c in ctx.taxonomy} if keys is None else set(keys)
    if not wanted:
        return {}
    members: dict[str, list[MemberRow]] = {k: [] for k in wanted}
    for row in ctx.store.category_members(dict(scope), sorted(wanted)):
        members[row.category_key].append(row)
    rows = []
    counts = {}
    for category in ctx.taxonomy:
        key = category["key"]
        if key not in wanted:
            continue
        items = members[key]
        with_vec = [r for r in items if r.embedding is not None]
        chosen: list[MemberRow]
        if with_vec:
            matrix = np.vstack([r.embedding for r in with_vec if r.embedding is not None])
            centroid = matrix.mean(axis=0)
            closeness = vector_math.inner_products(matrix, centroid)
            order = sorted(
                range(len(with_vec)),
                key=lambda i: (
                    -(float(closeness[i]) * with_vec[i].confidence),
                    with_vec[i].item_id,
                ),
            )
            chosen = [with_vec[i] for i in order[:anchors]]
        else:
            chosen = sorted(items, key=lambda r: (-r.confidence, r.item_id))[:anchors]
        summary = " ".join(r.text for r in chosen)
        summary = ctx.tokens.truncate(summary, 120) if summary else ""
        counts[key] = len(items)
        rows.append(
            CategoryRow(
                scope=dict(scope),
                category_key=key,
                name=category["name"],
                description=category["description"],
                summary=summary,
                anchor_ids=[r.item_id for r in chosen],
                item_count=len(items),
                updated_at=ctx.clock(),
            )
        )
    ctx.store.upsert_categories(rows)
    return counts


def store_intention(
    ctx: StepContext, scope: Mapping[str, str], intention: Mapping[str, Any]
) -> int:
    previous = previous_intention(ctx, scope)
    fields = ("goals", "constraints", "progress")
    if previous and all(previous[f] == intention[f] for f in fields):
        return int(previous["version"])
    if not previous and not any(intention[f] for f in fields):
        return 0
    version = (previous["version"] if previous else 0) + 1
    ctx.store.add_intention(
        IntentionRow(
            scope=dict(scope),
            version=version,
            goals=list(intention["goals"]),
            constraints=list(intention["constraints"]),
            progress=list(intention["progress"]),
            source_item_ids=list(intention.get("source_item_ids", [])),
            created_at=ctx.clock(),
        )
    )
    return version
