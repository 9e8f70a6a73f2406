"""Tri-score ranking and maximal marginal relevance (spec "Tri-Score Re-Ranking"). Pure.

- relevance: cosine between the query and entry embeddings when the entry has one, else the
  entry's lexical (BM25) score normalised by the best lexical score of the candidates;
- recency: ``exp(-age / tau)`` with ``tau`` = 7 days by default (age from ``created_at``);
- importance: the stored value;
- total: ``alpha * relevance + beta * recency + gamma * importance``.

MMR (Carbonell & Goldstein) then picks ``k`` entries one by one, each maximising
``lambda * value - (1 - lambda) * max similarity to the entries already picked``, where value
is the total scaled to [0, 1] and similarity is the cosine between entry embeddings, or the
tag overlap (Jaccard) when either entry has no embedding. Ties prefer the entry whose tags
overlap least with those picked (the spec's tie-break), then the better total, then the id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

__all__ = [
    "RECENCY_MIN_SPREAD",
    "Candidate",
    "TriScore",
    "age_seconds",
    "mmr",
    "parse_time",
    "recency",
    "tag_overlap",
    "tri_score",
    "weigh",
]

DAY_S = 86_400.0


def parse_time(value: str) -> datetime:
    """An ISO 8601 timestamp as an aware UTC datetime (naive values are taken as UTC)."""
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def age_seconds(created_at: str, now: datetime) -> float:
    """Seconds from ``created_at`` to ``now`` (0 for entries dated in the future)."""
    return max(0.0, (now - parse_time(created_at)).total_seconds())


def recency(created_at: str, now: datetime, *, tau_days: float) -> float:
    return math.exp(-age_seconds(created_at, now) / (tau_days * DAY_S))


@dataclass(frozen=True, slots=True)
class TriScore:
    relevance: float
    recency: float
    importance: float
    total: float


def tri_score(
    *,
    relevance: float,
    created_at: str,
    importance: float,
    now: datetime,
    tau_days: float,
    alpha: float,
    beta: float,
    gamma: float,
) -> TriScore:
    rel = min(1.0, max(0.0, relevance))
    rec = recency(created_at, now, tau_days=tau_days)
    return TriScore(rel, rec, importance, alpha * rel + beta * rec + gamma * importance)


# Recency is min-max scaled over a spread of at least this much (about 17 hours of age
# between fresh entries at the default tau of 7 days). Scaled over their own spread, entries
# saved seconds apart (recency 0.99999 against 0.99998: an agent's burst of writes, a team's
# servers) spanned the whole [0, 1] range, and every near miss inside the relevance gate
# saved after an exact match outranked it, until the budget cut the match
# (tests/server/test_team_server.py).
RECENCY_MIN_SPREAD = 0.1


def _scaled(values: list[float], *, min_spread: float = 0.0) -> list[float]:
    low, high = min(values), max(values)
    spread = max(high - low, min_spread)
    return [0.0 if spread == 0 else (v - low) / spread for v in values]


def weigh(
    scores: list[TriScore],
    *,
    alpha: float,
    beta: float,
    gamma: float,
    normalise: bool = True,
    relevance_gate: float = 0.0,
) -> list[TriScore]:
    """The candidates' totals: ``alpha * relevance + lift * (beta * recency + gamma *
    importance)``.

    With ``normalise`` each component is first scaled to [0, 1] by min-max over the candidate
    set (Park et al., *Generative Agents*, §4.1: "we normalize the recency, relevance, and
    importance scores to the range of [0, 1] using min-max scaling"); a component equal across
    all candidates scales to 0 (it cannot order them). Recency is scaled over a spread of at
    least :data:`RECENCY_MIN_SPREAD`, so seconds of age do not weigh as much as days.

    ``lift`` is the relevance gate: 1 for a candidate whose raw relevance is at least
    ``relevance_gate`` times the best raw relevance of the set, else 0. Recency and importance
    then order the entries that answer the query, and never lift an entry that does not above
    one that does (with the spec's plain sum, an entry of relevance 0 and importance 1 beat one
    of relevance 0.7 and importance 0.3). ``relevance_gate = 0`` is the spec's plain sum.
    The reported components stay raw; only the total, which orders, changes.
    """
    if not scores:
        return []
    if normalise:
        rel = _scaled([s.relevance for s in scores])
        rec = _scaled([s.recency for s in scores], min_spread=RECENCY_MIN_SPREAD)
        imp = _scaled([s.importance for s in scores])
    else:
        rel = [s.relevance for s in scores]
        rec = [s.recency for s in scores]
        imp = [s.importance for s in scores]
    floor = relevance_gate * max(s.relevance for s in scores)
    out: list[TriScore] = []
    for s, a, b, c in zip(scores, rel, rec, imp, strict=True):
        lift = 1.0 if relevance_gate <= 0 or (s.relevance >= floor and s.relevance > 0) else 0.0
        out.append(
            TriScore(
                s.relevance, s.recency, s.importance, alpha * a + lift * (beta * b + gamma * c)
            )
        )
    return out


@dataclass
class Candidate:
    """An entry under ranking: its scores, tags and (optional) embedding."""

    item_id: int
    scores: TriScore
    tags: frozenset[str]
    vector: np.ndarray | None = None
    payload: object = field(default=None, compare=False)


def tag_overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two tag sets (0 when both are empty)."""
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def _similarity(a: Candidate, b: Candidate) -> float:
    if a.vector is not None and b.vector is not None:
        return float(np.dot(a.vector, b.vector))
    return tag_overlap(a.tags, b.tags)


def mmr(candidates: Sequence[Candidate], *, k: int, lam: float, scale: float) -> list[Candidate]:
    """Pick ``k`` of ``candidates`` by maximal marginal relevance (see the module docstring).

    Args:
        candidates: entries with their tri-scores.
        k: how many to pick.
        lam: the relevance/diversity trade-off (1: by total only, 0: diversity only).
        scale: the largest possible total (alpha + beta + gamma), to bring totals to [0, 1].
    """
    remaining = sorted(candidates, key=lambda c: (-c.scores.total, c.item_id))
    picked: list[Candidate] = []
    best_sim = dict.fromkeys((c.item_id for c in remaining), 0.0)
    picked_tags: set[str] = set()
    scale = scale if scale > 0 else 1.0
    while remaining and len(picked) < k:

        def key(c: Candidate) -> tuple[float, int, float, int]:
            value = lam * (c.scores.total / scale) - (1 - lam) * best_sim[c.item_id]
            return (-round(value, 9), len(c.tags & picked_tags), -c.scores.total, c.item_id)

        choice = min(remaining, key=key)
        remaining.remove(choice)
        picked.append(choice)
        picked_tags.update(choice.tags)
        for other in remaining:
            best_sim[other.item_id] = max(best_sim[other.item_id], _similarity(choice, other))
    return picked
