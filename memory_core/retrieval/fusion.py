"""Rank fusion of several retrieval arms: reciprocal rank fusion and weighted score fusion.

Pure functions over ranked lists of :class:`~memory_core.models.ScoredId`. Each arm's list is
ordered best first; raw scores keep their own meaning (bm25 is negative, more negative is
better; a similarity is higher-better), so every arm states its direction. Output is
deterministic: ties are broken by item id, and every id appears once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from memory_core.models import ScoredId

__all__ = [
    "ArmHit",
    "FusedHit",
    "Normalisation",
    "fuse",
    "normalise_scores",
    "rrf",
    "weighted",
]

Normalisation = Literal["minmax", "max"]


@dataclass(frozen=True, slots=True)
class ArmHit:
    """One arm's view of an item: its raw score and 1-based rank in that arm."""

    score: float
    rank: int


@dataclass(frozen=True, slots=True)
class FusedHit:
    """An item after fusion: the fused score and each arm's raw score and rank."""

    item_id: int
    score: float
    arms: Mapping[str, ArmHit] = field(default_factory=dict)


def _oriented(scores: Sequence[float], higher_is_better: bool) -> list[float]:
    return list(scores) if higher_is_better else [-s for s in scores]


def normalise_scores(
    scores: Sequence[float], *, higher_is_better: bool = True, method: Normalisation = "minmax"
) -> list[float]:
    """Scale one arm's raw scores into [0, 1], 1 being best.

    ``minmax`` maps the best to 1 and the worst to 0 (all equal: all 1). ``max`` divides by the
    best magnitude, keeping the gaps' proportions (useful when the worst hit is still good).
    """
    if not scores:
        return []
    values = _oriented(scores, higher_is_better)
    top, bottom = max(values), min(values)
    if method == "max":
        if top <= 0:
            return [1.0 if v == top else 0.0 for v in values]
        return [max(0.0, v / top) for v in values]
    if top == bottom:
        return [1.0 for _ in values]
    return [(v - bottom) / (top - bottom) for v in values]


def _collect(arms: Mapping[str, Sequence[ScoredId]]) -> dict[int, dict[str, ArmHit]]:
    found: dict[int, dict[str, ArmHit]] = {}
    for name in sorted(arms):
        seen: set[int] = set()
        rank = 0
        for hit in arms[name]:
            if hit.item_id in seen:  # an arm listing an id twice keeps its best (first) rank
                continue
            seen.add(hit.item_id)
            rank += 1
            found.setdefault(hit.item_id, {})[name] = ArmHit(hit.score, rank)
    return found


def _ordered(scores: dict[int, float], found: dict[int, dict[str, ArmHit]]) -> list[FusedHit]:
    ordered = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
    return [FusedHit(item_id, score, found[item_id]) for item_id, score in ordered]


def rrf(
    arms: Mapping[str, Sequence[ScoredId]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> list[FusedHit]:
    """Reciprocal rank fusion: ``sum(weight / (k + rank))`` over the arms an item is in.

    Args:
        arms: arm name -> hits, best first.
        k: the RRF constant (60 in the original paper); larger flattens the rank curve.
        weights: per-arm multiplier (default 1 each).

    Raises:
        ValueError: ``k`` is not positive or a weight is negative.
    """
    if k <= 0:
        raise ValueError(f"rrf k must be positive, got {k}")
    weights = weights or {}
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"fusion weights cannot be negative: {dict(weights)}")
    found = _collect(arms)
    scores = {
        item_id: sum(weights.get(name, 1.0) / (k + hit.rank) for name, hit in hits.items())
        for item_id, hits in found.items()
    }
    return _ordered(scores, found)


def weighted(
    arms: Mapping[str, Sequence[ScoredId]],
    *,
    weights: Mapping[str, float] | None = None,
    higher_is_better: Mapping[str, bool] | None = None,
    normalisation: Normalisation = "minmax",
) -> list[FusedHit]:
    """Weighted sum of per-arm normalised scores (an item missing from an arm gets 0 there).

    Args:
        arms: arm name -> hits, best first.
        weights: per-arm weight (default 1 each).
        higher_is_better: per-arm score direction (default True); bm25 arms pass False.
        normalisation: how each arm's raw scores are scaled into [0, 1].

    Raises:
        ValueError: a weight is negative.
    """
    weights = weights or {}
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"fusion weights cannot be negative: {dict(weights)}")
    direction = higher_is_better or {}
    found = _collect(arms)
    scores: dict[int, float] = dict.fromkeys(found, 0.0)
    for name in sorted(arms):
        unique: dict[int, float] = {}
        for hit in arms[name]:
            unique.setdefault(hit.item_id, hit.score)
        normalised = normalise_scores(
            list(unique.values()),
            higher_is_better=direction.get(name, True),
            method=normalisation,
        )
        weight = weights.get(name, 1.0)
        for item_id, value in zip(unique, normalised, strict=True):
            scores[item_id] += weight * value
    return _ordered(scores, found)


def fuse(
    arms: Mapping[str, Sequence[ScoredId]],
    *,
    method: Literal["rrf", "weighted"],
    weights: Mapping[str, float] | None = None,
    higher_is_better: Mapping[str, bool] | None = None,
    rrf_k: int = 60,
    normalisation: Normalisation = "minmax",
) -> list[FusedHit]:
    """Fuse with the configured method (see :func:`rrf` and :func:`weighted`).

    Raises:
        ValueError: an unknown method, or invalid parameters.
    """
    if method == "rrf":
        return rrf(arms, k=rrf_k, weights=weights)
    if method == "weighted":
        return weighted(
            arms, weights=weights, higher_is_better=higher_is_better, normalisation=normalisation
        )
    raise ValueError(f"unknown fusion method {method!r}; use 'rrf' or 'weighted'")
