"""When to stop a ranked list of directives: a calibrated P(relevant) per position (pure).

Measured, not adopted (bench/rules_eval/RESULTS.md, 2026-11-26 "A learned stopping rule"):
``tune_stop.py`` applies it to ``query_directives``' ranking from outside, so memoir's own
ranking and packer are unchanged.

The ranking orders the candidates; this says how far down the order is still worth reading.
For each ranked candidate a logistic model over query-time features (its score and the gap to
the best and to the next, its rank, relevance, similarity, lexical rank, severity, how many
candidates there are) estimates the probability that it matches what the task needs; the list
stops at the first candidate below a threshold (stop, do not skip, as packing does).

Fitted and evaluated leave one repository out on the public dev set by ``tune_stop.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["FEATURES", "StopModel", "stop_features"]

FEATURES = (
    "log_rank",
    "score_ratio",
    "score_gap_top",
    "score_gap_next",
    "relevance",
    "relevance_ratio",
    "semantic",
    "semantic_gap_top",
    "lexical",
    "must",
    "total",
    "log_candidates",
)


class _Ranked(Protocol):
    """What the features read of a candidate (``rerank.Candidate``)."""

    @property
    def total(self) -> float: ...
    @property
    def relevance(self) -> float: ...
    @property
    def semantic(self) -> float: ...
    @property
    def lexical_rank(self) -> int | None: ...
    @property
    def must(self) -> bool: ...


def stop_features(scores: Sequence[float], ranked: Sequence[_Ranked]) -> list[list[float]]:
    """One row of FEATURES per ranked candidate (``scores`` and ``ranked`` best first)."""
    if not ranked:
        return []
    top = scores[0] or 1.0
    best_relevance = max(c.relevance for c in ranked) or 1.0
    best_semantic = max(c.semantic for c in ranked)
    log_candidates = math.log(len(ranked))
    rows = []
    for position, (score, c) in enumerate(zip(scores, ranked, strict=True)):
        following = scores[position + 1] if position + 1 < len(scores) else score
        rows.append(
            [
                math.log1p(position),
                score / top,
                (scores[0] - score) / 100.0,
                (score - following) / 100.0,
                c.relevance,
                c.relevance / best_relevance,
                c.semantic,
                best_semantic - c.semantic,
                1.0 / (1.0 + c.lexical_rank) if c.lexical_rank is not None else 0.0,
                1.0 if c.must else 0.0,
                c.total / 100.0,
                log_candidates,
            ]
        )
    return rows


@dataclass(frozen=True)
class StopModel:
    """Logistic P(relevant) over FEATURES and the threshold the list stops at.

    Attributes:
        weights: one per feature, on standardised features (``(x - mean) / scale``).
        bias: the intercept.
        mean: the training mean of each feature.
        scale: the training standard deviation of each feature.
        threshold: stop at the first candidate whose probability is below this.
        keep_at_least: never stop before this many (a vague task still gets its best few).
    """

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    threshold: float
    keep_at_least: int = 2

    def probabilities(self, scores: Sequence[float], ranked: Sequence[_Ranked]) -> list[float]:
        """P(relevant) of each ranked candidate."""
        out = []
        for row in stop_features(scores, ranked):
            z = self.bias + sum(
                w * (x - m) / s
                for w, x, m, s in zip(self.weights, row, self.mean, self.scale, strict=True)
            )
            out.append(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z)))))
        return out

    def cut(self, scores: Sequence[float], ranked: Sequence[_Ranked]) -> int:
        """How many of the ranked candidates to keep: up to the first one below threshold."""
        for position, p in enumerate(self.probabilities(scores, ranked)):
            if position >= self.keep_at_least and p < self.threshold:
                return position
        return len(ranked)

    def as_dict(self) -> dict[str, Any]:
        """The model as a JSON-ready dict."""
        return {
            "features": list(FEATURES),
            "weights": list(self.weights),
            "bias": self.bias,
            "mean": list(self.mean),
            "scale": list(self.scale),
            "threshold": self.threshold,
            "keep_at_least": self.keep_at_least,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StopModel:
        """A model from its stored form.

        Raises:
            ValueError: the stored features are not this module's FEATURES.
        """
        if tuple(data["features"]) != FEATURES:
            raise ValueError(f"stop model features {data['features']} are not {list(FEATURES)}")
        return cls(
            weights=tuple(float(w) for w in data["weights"]),
            bias=float(data["bias"]),
            mean=tuple(float(m) for m in data["mean"]),
            scale=tuple(float(s) for s in data["scale"]),
            threshold=float(data["threshold"]),
            keep_at_least=int(data["keep_at_least"]),
        )
