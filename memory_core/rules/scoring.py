"""The seed-003 weighted score, one signal per term, with weights from configuration.

    Score = Authority × 10 + WhenToApply × 8 + LayerMatch × 7 + TopicOverlap × 5
            + SeverityBoost × 4 + SemanticSim × 3                      (Requirement 3.2)

Signals are 0..1 except SeverityBoost (MUST=3, SHOULD=2, MAY=1, Requirement 3.7). Two are
graded where the spec is binary, because a grade ranks better and reduces to the spec's value
in its clear cases: WhenToApply is the best share of a condition's content words found in the
task (1 when a condition is fully met), and LayerMatch gives a secondary candidate layer its
confidence relative to the detected one (1 for the detected layer and for ``*``, as specified).
Mode slugs shift weights (and add topics) per a table that ``[rules.modes]`` can override.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from memory_core.errors import ConfigError
from memory_core.rules.detection import STOPWORDS
from memory_core.rules.dictionaries import tokenize
from memory_core.rules.models import ScoreBreakdown
from memory_core.rules.topics import stem

__all__ = [
    "MODE_TOPICS",
    "MODE_WEIGHTS",
    "SEVERITY_POINTS",
    "SIGNALS",
    "SPEC_WEIGHTS",
    "QueryFeatures",
    "WeightVector",
    "condition_terms",
    "content_stems",
    "resolve_weights",
    "score_directive",
    "score_total",
    "signal_values",
    "total_of",
    "weight_vector",
    "when_to_apply_match",
]

SIGNALS: Final = (
    "authority",
    "when_to_apply",
    "layer_match",
    "topic_overlap",
    "severity_boost",
    "semantic_sim",
)
SPEC_WEIGHTS: Final = MappingProxyType(
    {
        "authority": 10.0,
        "when_to_apply": 8.0,
        "layer_match": 7.0,
        "topic_overlap": 5.0,
        "severity_boost": 4.0,
        "semantic_sim": 3.0,
    }
)
# Absolute weights per mode (only the ones that change); [rules.modes] overrides these.
MODE_WEIGHTS: Final = MappingProxyType(
    {
        "code": MappingProxyType({}),
        "architect": MappingProxyType(
            {"authority": 12.0, "layer_match": 9.0, "topic_overlap": 6.0, "severity_boost": 3.0}
        ),
        "debug": MappingProxyType(
            {"when_to_apply": 9.0, "semantic_sim": 6.0, "severity_boost": 3.0}
        ),
        "test": MappingProxyType({"topic_overlap": 7.0, "layer_match": 8.0}),
        "ask": MappingProxyType({"semantic_sim": 5.0, "severity_boost": 3.0}),
        "review": MappingProxyType({"severity_boost": 5.0, "authority": 11.0}),
    }
)
# Topics a mode cares about whatever the task says (architect mode: architectural patterns).
MODE_TOPICS: Final = MappingProxyType(
    {
        "architect": ("architecture",),
        "debug": ("error-handling", "logging"),
        "test": ("testing",),
        "review": ("security",),
    }
)
SEVERITY_POINTS: Final = MappingProxyType({"MUST": 3.0, "SHOULD": 2.0, "MAY": 1.0})
# Generic verbs say little about whether a condition applies ("adding", "changing").
_WEAK_WORDS: Final = frozenset(
    stem(w)
    for w in [
        "add",
        "adding",
        "change",
        "changing",
        "create",
        "creating",
        "write",
        "writing",
        "update",
        "updating",
        "make",
        "new",
        "use",
        "using",
        "code",
        "work",
        "working",
        "implement",
        "implementing",
        "any",
    ]
)
_WEAK_WEIGHT = 0.3


def resolve_weights(
    mode: str | None,
    *,
    configured: Mapping[str, float],
    configured_modes: Mapping[str, Mapping[str, float]],
) -> tuple[dict[str, float], str | None]:
    """The weights for a query: spec defaults < ``[rules] weights`` < the mode's table.

    Returns:
        (weights, warning) where warning names an unknown mode (defaults are then used).

    Raises:
        ConfigError: a configured weight names an unknown signal or is negative.
    """
    weights = dict(SPEC_WEIGHTS)
    for source in (configured, *configured_modes.values()):
        for key, value in source.items():
            if key not in SPEC_WEIGHTS or value < 0:
                raise ConfigError(
                    f"invalid rules weight {key!r} = {value!r}",
                    hint="use non-negative numbers for: " + ", ".join(SIGNALS),
                )
    weights.update(configured)
    if mode is None:
        return weights, None
    slug = mode.strip().casefold()
    table = configured_modes.get(slug, MODE_WEIGHTS.get(slug))
    if table is None:
        known = sorted({*MODE_WEIGHTS, *configured_modes})
        return weights, f"unknown mode {mode!r}; default weights used (known: {', '.join(known)})"
    weights.update(table)
    return weights, None


def content_stems(text: str) -> frozenset[str]:
    """Stems of the non-stopword tokens of ``text``."""
    return frozenset(stem(t) for t in tokenize(text) if t not in STOPWORDS and len(t) > 1)


def condition_terms(text: str) -> tuple[tuple[str, float], ...]:
    """A When-to-Apply condition as weighted stems (generic verbs weigh less)."""
    return tuple(
        (s, _WEAK_WEIGHT if s in _WEAK_WORDS else 1.0) for s in sorted(content_stems(text))
    )


def when_to_apply_match(
    conditions: tuple[tuple[tuple[str, float], ...], ...], task: frozenset[str]
) -> tuple[float, int]:
    """Best share of a condition's (weighted) words present in the task.

    Returns:
        (score 0..1, index of the best condition or -1). A condition matching only generic
        verbs scores 0.
    """
    best, best_index = 0.0, -1
    for index, terms in enumerate(conditions):
        # Most conditions share no strong word with the task: test that first (a condition
        # with one has a positive total), before summing its weights.
        if not any(w == 1.0 and s in task for s, w in terms):
            continue
        total = sum(w for _, w in terms)
        hit = sum(w for s, w in terms if s in task)
        if hit / total > best:
            best, best_index = hit / total, index
    return round(best, 4), best_index


@dataclass(frozen=True)
class QueryFeatures:
    """What the scorer needs to know about the task."""

    layer: str | None
    layer_confidence: Mapping[str, float]
    topics: frozenset[str]  # detected topics with their broad parents
    task_stems: frozenset[str]
    # The layer match of each candidate layer (its confidence over the best one), worked
    # out once per query instead of once per candidate.
    candidate_layer_match: Mapping[str, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        top = max(self.layer_confidence.values(), default=0.0)
        matches = {
            layer: round(confidence / top, 4) if top else 0.0
            for layer, confidence in self.layer_confidence.items()
        }
        object.__setattr__(self, "candidate_layer_match", matches)


def _signals(
    severity: str,
    layer: str,
    topics: frozenset[str],
    conditions: tuple[tuple[tuple[str, float], ...], ...],
    rule_authoritative_for: frozenset[str],
    semantic: float | None,
    query: QueryFeatures,
    wta_cache: dict[int, tuple[float, int]] | None,
    condition_strong: frozenset[str] | None = None,
) -> tuple[float, float, int, float, float, float, float]:
    """(authority, when_to_apply, condition index, layer_match, overlap, severity, semantic)."""
    authority = 1.0 if not rule_authoritative_for.isdisjoint(query.topics) else 0.0
    if condition_strong is not None and condition_strong.isdisjoint(query.task_stems):
        wta, which = 0.0, -1  # what when_to_apply_match finds: no condition is met
    elif wta_cache is None:
        wta, which = when_to_apply_match(conditions, query.task_stems)
    else:
        # Rule-level conditions are shared by every directive of the rule: match them once.
        key = id(conditions)
        cached = wta_cache.get(key)
        if cached is None:
            cached = wta_cache[key] = when_to_apply_match(conditions, query.task_stems)
        wta, which = cached
    if layer == "*" or (query.layer is not None and layer == query.layer):
        layer_match = 1.0
    else:
        layer_match = query.candidate_layer_match.get(layer, 0.0)
    shared = len(topics & query.topics)
    union = len(topics) + len(query.topics) - shared
    overlap = round(shared / union, 4) if union else 0.0
    severity_boost = SEVERITY_POINTS.get(severity, 1.0)
    sim = 0.0 if semantic is None else round(max(0.0, min(1.0, float(semantic))), 4)
    return authority, wta, which, layer_match, overlap, severity_boost, sim


def signal_values(
    *,
    severity: str,
    layer: str,
    topics: frozenset[str],
    conditions: tuple[tuple[tuple[str, float], ...], ...],
    rule_authoritative_for: frozenset[str],
    semantic: float | None,
    query: QueryFeatures,
    wta_cache: dict[int, tuple[float, int]] | None = None,
    condition_strong: frozenset[str] | None = None,
) -> tuple[float, float, int, float, float, float, float]:
    """(authority, when_to_apply, condition index, layer_match, overlap, severity, semantic).

    ``condition_strong``: the strong stems of all of ``conditions`` (the index keeps them per
    directive); when the task shares none, the conditions are not matched one by one.
    """
    return _signals(
        severity,
        layer,
        topics,
        conditions,
        rule_authoritative_for,
        semantic,
        query,
        wta_cache,
        condition_strong,
    )


# The weight of each of SIGNALS, in that order.
WeightVector = tuple[float, float, float, float, float, float]


def total_of(
    values: tuple[float, float, int, float, float, float, float],
    weights: Mapping[str, float] | WeightVector,
) -> float:
    """The weighted total of :func:`signal_values` (``weights`` as a mapping, or as the
    :func:`weight_vector` of one, which a loop over many candidates builds once)."""
    if isinstance(weights, tuple):
        authority, wta, _, layer_match, overlap, severity_boost, sim = values
        w_authority, w_wta, w_layer, w_overlap, w_severity, w_sim = weights
        return round(
            authority * w_authority
            + wta * w_wta
            + layer_match * w_layer
            + overlap * w_overlap
            + severity_boost * w_severity
            + sim * w_sim,
            4,
        )
    return _total(values, weights)


def weight_vector(weights: Mapping[str, float]) -> WeightVector:
    """The weights of :data:`SIGNALS`, in order (a missing one weighs 0), for :func:`total_of`."""
    w = tuple(weights.get(name, 0.0) for name in SIGNALS)
    return (w[0], w[1], w[2], w[3], w[4], w[5])


def _total(
    values: tuple[float, float, int, float, float, float, float], weights: Mapping[str, float]
) -> float:
    authority, wta, _, layer_match, overlap, severity_boost, sim = values
    return round(
        authority * weights.get("authority", 0.0)
        + wta * weights.get("when_to_apply", 0.0)
        + layer_match * weights.get("layer_match", 0.0)
        + overlap * weights.get("topic_overlap", 0.0)
        + severity_boost * weights.get("severity_boost", 0.0)
        + sim * weights.get("semantic_sim", 0.0),
        4,
    )


def score_total(
    *,
    severity: str,
    layer: str,
    topics: frozenset[str],
    conditions: tuple[tuple[tuple[str, float], ...], ...],
    rule_authoritative_for: frozenset[str],
    semantic: float | None,
    query: QueryFeatures,
    weights: Mapping[str, float],
    wta_cache: dict[int, tuple[float, int]] | None = None,
) -> float:
    """The total of :func:`score_directive` without building the explanation (the hot path)."""
    values = _signals(
        severity, layer, topics, conditions, rule_authoritative_for, semantic, query, wta_cache
    )
    return _total(values, weights)


def score_directive(
    *,
    severity: str,
    layer: str,
    topics: frozenset[str],
    conditions: tuple[tuple[tuple[str, float], ...], ...],
    condition_texts: tuple[str, ...],
    rule_authoritative_for: frozenset[str],
    semantic: float | None,
    query: QueryFeatures,
    weights: Mapping[str, float],
    relevance: float | None = None,
    total: float | None = None,
    values: tuple[float, float, int, float, float, float, float] | None = None,
) -> ScoreBreakdown:
    """Score one directive against the task (pure; Requirements 3.2–3.8).

    Args:
        relevance: the directive's task relevance, when the ranking stage computed it: kept
            in the breakdown, with a reason saying it.
        total: the ranking stage's final score, to report instead of the weighted total.
        values: this directive's :func:`signal_values` for this query and ``semantic``, when
            the ranking stage already has them (not worked out again).

    Returns:
        The breakdown: every signal, the weights, the total and human-readable reasons.
    """
    if values is None:
        values = _signals(
            severity, layer, topics, conditions, rule_authoritative_for, semantic, query, None
        )
    authority, wta, which, layer_match, overlap, severity_boost, sim = values
    reasons: list[str] = []
    if authority:
        shared_authority = sorted(rule_authoritative_for & query.topics)
        reasons.append("rule is authoritative for " + ", ".join(shared_authority))
    if which >= 0:
        reasons.append(f"when to apply: {condition_texts[which][:80]!r} ({wta:.2f})")
    if layer == "*":
        reasons.append("applies to every layer (*)")
    elif layer_match == 1.0:
        reasons.append(f"layer {layer} matches")
    elif layer_match:
        reasons.append(f"layer {layer} is a candidate ({layer_match:.2f})")
    shared = topics & query.topics
    if shared:
        reasons.append("topics: " + ", ".join(sorted(shared)))
    if sim:
        reasons.append(f"semantic similarity {sim:.2f}")
    if relevance is not None:
        reasons.append(f"task relevance {relevance:.2f}")
    return ScoreBreakdown.model_construct(
        authority=authority,
        when_to_apply=wta,
        layer_match=layer_match,
        topic_overlap=overlap,
        severity_boost=severity_boost,
        semantic_sim=sim,
        weights=dict(weights),
        total=_total(values, weights) if total is None else total,
        relevance=0.0 if relevance is None else relevance,
        reasons=reasons,
    )
