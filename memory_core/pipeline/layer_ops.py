"""Category and intention operations shared by the memorize and evolve steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
    ItemRow,
    LayerStore,
    MemberRow,
)
from memory_core.storage.layer import vectors as vector_math
from memory_core.storage.layer.centroids import NO_SCORE, CategorySums, exact_sums

__all__ = [
    "categorise",
    "intention_for",
    "latest_intention",
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
    return latest_intention(ctx.store, scope)


def latest_intention(store: LayerStore, scope: Mapping[str, str]) -> dict[str, Any] | None:
    """The newest intention of one full scope as a plain dict, or None."""
    rows = store.latest_intentions(exact_filter(scope))
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


# How many best-scored members a category keeps to rescore on the next memorize (the anchors
# first): the wider the reserve, the larger the gap to the members not read, so the longer
# the incremental choice stays provably exact between two full reads.
_RESERVE = 24
# A score must beat the bound on every unread member's score by this much for the incremental
# choice to stand: the sums drift from the exact mean by ~1e-12 after many additions.
_MARGIN = 1e-9


def refresh_categories(
    ctx: StepContext,
    scope: Mapping[str, str],
    keys: Sequence[str] | None,
    anchors: int,
    changed: Sequence[ItemRow] | None = None,
) -> dict[str, int]:
    """Recompute item counts, anchors (items nearest the centroid, by confidence) and
    extractive summaries of the given categories of one scope (all when ``keys`` is None).

    With ``changed`` (the items a memorize just wrote), a category is refreshed from its
    running centroid sums (:mod:`memory_core.storage.layer.centroids`): only its reserve (the
    best-scored members of the last scoring, anchors first) and the changed items are scored.
    That choice is kept only when it provably equals the full recompute's: every member not
    read scored at most ``runner_up`` against the centroid of the last scoring and has not
    changed since, so it scores at most ``runner_up + weight_max * |centroid shift|`` now
    (Cauchy-Schwarz); when the last chosen anchor does not beat that bound, or the sums cannot
    tell, the category's members are read and everything recomputed, which also resets the
    sums exactly. Without
    ``changed`` (evolve) every category is recomputed from its members."""
    wanted = {c["key"] for c in ctx.taxonomy} if keys is None else set(keys)
    if not wanted:
        return {}
    by_key = {c["key"]: c for c in ctx.taxonomy}
    chosen_by_key: dict[str, tuple[list[_Candidate], int]] = {}
    full = set(wanted)
    if changed is not None:
        full = set()
        sums = ctx.store.category_sums(dict(scope), sorted(wanted))
        previous = {
            c.category_key: [*c.anchor_ids, *sums[c.category_key].reserve_ids]
            for c in ctx.store.categories(exact_filter(scope))
            if c.category_key in wanted and c.category_key in sums
        }
        candidates = _candidates(ctx, wanted, previous, changed)
        updated: dict[str, CategorySums] = {}
        for key in sorted(wanted):
            done = _incremental(sums.get(key, CategorySums()), candidates.get(key, {}), anchors)
            if done is None:
                full.add(key)
            else:
                chosen_by_key[key] = (done[0], done[1].member_count)
                updated[key] = done[1]
        if updated:
            ctx.store.put_category_sums(dict(scope), updated)
    if full:
        exact: dict[str, CategorySums] = {}
        members: dict[str, list[MemberRow]] = {k: [] for k in full}
        for row in ctx.store.category_members(dict(scope), sorted(full)):
            members[row.category_key].append(row)
        for key in full:
            items = [_Candidate(r.item_id, r.text, r.confidence, r.embedding) for r in members[key]]
            chosen, exact[key] = _recompute(items, anchors)
            chosen_by_key[key] = (chosen, len(items))
        ctx.store.put_category_sums(dict(scope), exact)
    rows = []
    counts = {}
    for key in (c["key"] for c in ctx.taxonomy):
        if key not in wanted:
            continue
        chosen, count = chosen_by_key[key]
        summary = " ".join(r.text for r in chosen)
        summary = ctx.tokens.truncate(summary, 120) if summary else ""
        counts[key] = count
        rows.append(
            CategoryRow(
                scope=dict(scope),
                category_key=key,
                name=by_key[key]["name"],
                description=by_key[key]["description"],
                summary=summary,
                anchor_ids=[r.item_id for r in chosen],
                item_count=count,
                updated_at=ctx.clock(),
            )
        )
    ctx.store.upsert_categories(rows)
    return counts


@dataclass(frozen=True)
class _Candidate:
    item_id: str
    text: str
    confidence: float
    embedding: np.ndarray | None


def _candidates(
    ctx: StepContext,
    wanted: set[str],
    previous: Mapping[str, Sequence[str]],
    changed: Sequence[ItemRow],
) -> dict[str, dict[str, _Candidate]]:
    """Per category: its previous anchors (read by id) and the changed items, still active
    members of it."""
    rows = {r.item_id: r for r in changed}
    missing = [i for ids in previous.values() for i in ids if i not in rows]
    rows.update({r.item_id: r for r in ctx.store.items_by_id(missing)})
    out: dict[str, dict[str, _Candidate]] = {}
    for row in rows.values():
        if row.status == "active" and row.category_key in wanted:
            out.setdefault(row.category_key, {})[row.item_id] = _Candidate(
                row.item_id, row.text, row.confidence, row.embedding
            )
    return out


def _order(items: Sequence[_Candidate], centroid: np.ndarray) -> list[tuple[float, _Candidate]]:
    matrix = np.vstack([np.asarray(r.embedding, dtype=np.float64) for r in items])
    closeness = vector_math.inner_products(matrix, centroid)
    scored = [(float(closeness[i]) * r.confidence, r) for i, r in enumerate(items)]
    scored.sort(key=lambda p: (-p[0], p[1].item_id))
    return scored


def _recompute(items: Sequence[_Candidate], anchors: int) -> tuple[list[_Candidate], CategorySums]:
    """The anchors of a category from all its members, and its exact sums."""
    with_vec = [r for r in items if r.embedding is not None]
    members = [(r.confidence, r.embedding) for r in items]
    if not with_vec:
        chosen = sorted(items, key=lambda r: (-r.confidence, r.item_id))[:anchors]
        return chosen, exact_sums(members)
    sums = exact_sums(members)
    centroid = sums.centroid()
    assert centroid is not None
    scored = _order(with_vec, centroid)
    reserve = max(_RESERVE, anchors)
    runner_up = scored[reserve][0] if len(scored) > reserve else NO_SCORE
    chosen = [r for _, r in scored[:anchors]]
    kept = [r.item_id for _, r in scored[:reserve]]
    return chosen, exact_sums(members, centroid, runner_up, kept)


def _incremental(
    sums: CategorySums, candidates: Mapping[str, _Candidate], anchors: int
) -> tuple[list[_Candidate], CategorySums] | None:
    """The anchors from the candidates alone and the sums to store, or None when that choice
    is not provably the full recompute's (the caller then reads the members)."""
    items = sorted(candidates.values(), key=lambda r: r.item_id)
    if sums.vector_count == 0:
        if sums.scored_centroid is not None or len(items) < min(anchors, sums.member_count):
            return None  # vectors left the category since: only the full path knows
        # nobody's confidence but a changed item's moved, and every other member ranked
        # below the previous anchors: the top among candidates is the top of all
        return sorted(items, key=lambda r: (-r.confidence, r.item_id))[:anchors], sums
    centroid = sums.centroid()
    with_vec = [r for r in items if r.embedding is not None]
    if centroid is None or sums.scored_centroid is None or not with_vec:
        return None
    if len(sums.scored_centroid) != len(centroid):
        return None
    scored = _order(with_vec, centroid)
    chosen = [r for _, r in scored[:anchors]]
    reserve = max(_RESERVE, anchors)
    left_out = scored[reserve][0] if len(scored) > reserve else NO_SCORE
    if len(with_vec) < sums.vector_count:  # some members were not read: bound their scores
        shift = float(np.linalg.norm(centroid - sums.scored_centroid))
        bound = sums.runner_up + sums.weight_max * shift
        if len(chosen) < anchors or scored[len(chosen) - 1][0] <= bound + _MARGIN:
            return None
        left_out = max(left_out, bound)
    kept = tuple(r.item_id for _, r in scored[:reserve])
    return chosen, replace(sums, scored_centroid=centroid, runner_up=left_out, reserve_ids=kept)


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
