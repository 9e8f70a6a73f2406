"""The candidate loop of ``query_directives`` on numpy columns (pure).

:func:`~memory_core.rules.scoring.signal_values`, :func:`~memory_core.rules.relevance.relevance`
and :func:`~memory_core.rules.scoring.total_of` per candidate cost ~3.5 µs of Python each,
~235 times a query at 2,000 directives. Here each set test is done once per distinct rule,
layer, topic set or condition list among the candidates (directives of a rule share them),
and the arithmetic runs on columns with the same float operations in the same order, and
the same rounding as Python's ``round(x, 4)`` (:func:`~memory_core.rules.rounding.round4`), so every value is the same
to the bit as the per-candidate functions give (``tests/rules/test_signal_columns.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from memory_core.rules.index import DirectiveIndex
from memory_core.rules.relevance import LEXICAL_WEIGHT, STRUCTURE_WEIGHT
from memory_core.rules.rounding import round4
from memory_core.rules.scoring import (
    SEVERITY_POINTS,
    QueryFeatures,
    WeightVector,
    when_to_apply_match,
)

__all__ = ["CandidateSignals", "DirectiveColumns", "candidate_signals"]

# A directive's When-to-Apply conditions as weighted stems, and their strong stems.
Conditions = tuple[tuple[tuple[tuple[str, float], ...], ...], frozenset[str]]


@dataclass(frozen=True)
class DirectiveColumns:
    """Per-directive codes of one index version, row i = ``ids[i]`` (sorted).

    Directives of a rule share its rule, mostly its layer, topic set and condition list:
    each distinct one gets a code, and a query tests each code once.
    """

    ids: np.ndarray
    severity: np.ndarray  # SeverityBoost points
    must: np.ndarray
    rule: np.ndarray  # code into rule_authority (-1: rule not indexed)
    rule_authority: tuple[frozenset[str], ...]
    layer: np.ndarray  # code into layers
    layers: tuple[str, ...]
    # Topic sets are mostly distinct (a directive's topics with their parents): the Jaccard
    # overlap is counted on a membership matrix, one row per directive, one column per topic.
    topic_members: np.ndarray  # bool, directives x topic_names
    topic_count: np.ndarray
    topic_column: dict[str, int]
    conditions: np.ndarray  # code into condition_terms / condition_strong
    condition_terms: tuple[tuple[tuple[tuple[str, float], ...], ...], ...]
    condition_strong: tuple[frozenset[str], ...]

    @classmethod
    def of(cls, index: DirectiveIndex) -> DirectiveColumns:
        """The columns of ``index`` (kept on it: built by the first query of a version)."""
        cached = index.columns
        if isinstance(cached, DirectiveColumns):
            return cached
        ids = sorted(index.directives)
        directives = [index.directives[i] for i in ids]
        rules: dict[str, int] = {}
        layers: dict[str, int] = {}
        # Keyed by identity: a rule's directives share its condition tuple (hashing the
        # nested tuples by value for every directive costs more than the whole build).
        conditions: dict[int, int] = {}
        condition_objects: list[Conditions] = []
        topic_column: dict[str, int] = {}
        rule_codes: list[int] = []
        layer_codes: list[int] = []
        condition_codes: list[int] = []
        member_rows: list[int] = []
        member_columns: list[int] = []
        for row, d in enumerate(directives):
            rule_codes.append(
                rules.setdefault(d.rule_id, len(rules)) if d.rule_id in index.rules else -1
            )
            layer_codes.append(layers.setdefault(d.layer, len(layers)))
            number = conditions.get(id(d.condition_terms))
            if number is None:
                number = conditions[id(d.condition_terms)] = len(condition_objects)
                condition_objects.append((d.condition_terms, d.condition_strong))
            condition_codes.append(number)
            for topic in d.topic_set:
                member_rows.append(row)
                member_columns.append(topic_column.setdefault(topic, len(topic_column)))
        members = np.zeros((len(ids), len(topic_column)), dtype=bool)
        members[member_rows, member_columns] = True
        severities = [d.severity for d in directives]
        # Dictionaries keep insertion order: the n-th key has code n.
        columns = cls(
            ids=np.array(ids, dtype=np.int64),
            severity=np.array([SEVERITY_POINTS.get(s, 1.0) for s in severities]),
            must=np.array([s == "MUST" for s in severities], dtype=bool),
            rule=np.array(rule_codes, dtype=np.int64),
            rule_authority=tuple(index.rules[rule_id].authoritative_for for rule_id in rules),
            layer=np.array(layer_codes, dtype=np.int64),
            layers=tuple(layers),
            topic_members=members,
            topic_count=members.sum(axis=1, dtype=np.int64),
            topic_column=topic_column,
            conditions=np.array(condition_codes, dtype=np.int64),
            condition_terms=tuple(terms for terms, _ in condition_objects),
            condition_strong=tuple(strong for _, strong in condition_objects),
        )
        index.columns = columns
        return columns


@dataclass(frozen=True)
class CandidateSignals:
    """Every candidate's signals, relevance and total, row i = ``ids[i]``.

    The columns of :func:`~memory_core.rules.scoring.signal_values` (authority,
    when_to_apply, condition index, layer_match, overlap, severity, semantic), then what the
    ranking stage reads.
    """

    ids: np.ndarray
    authority: np.ndarray
    when_to_apply: np.ndarray
    condition: np.ndarray
    layer_match: np.ndarray
    overlap: np.ndarray
    severity: np.ndarray
    semantic_sim: np.ndarray
    relevance: np.ndarray
    total: np.ndarray
    similarity: np.ndarray  # cosine similarity, 0 when unavailable
    lexical_rank: np.ndarray  # -1: not in the lexical arm
    must: np.ndarray

    def values(self, row: int) -> tuple[float, float, int, float, float, float, float]:
        """Row ``row`` as :func:`~memory_core.rules.scoring.signal_values` returns it."""
        return (
            float(self.authority[row]),
            float(self.when_to_apply[row]),
            int(self.condition[row]),
            float(self.layer_match[row]),
            float(self.overlap[row]),
            float(self.severity[row]),
            float(self.semantic_sim[row]),
        )


def _per_code(codes: np.ndarray, compute: Iterable[tuple[int, float]], size: int) -> np.ndarray:
    table = np.zeros(size)
    for number, value in compute:
        table[number] = value
    return table[codes]


def candidate_signals(
    index: DirectiveIndex,
    candidate_ids: Iterable[int],
    *,
    semantic: Mapping[int, float] | None,
    lexical_rank: Mapping[int, int],
    lexical_size: int,
    query: QueryFeatures,
    weights: WeightVector,
) -> CandidateSignals:
    """Signals, relevance and total of each candidate, as the per-candidate functions give.

    Args:
        index: the index the candidates belong to (every id must be one of its directives).
        candidate_ids: the candidates (any order; rows follow it).
        semantic: cosine similarity by item id, or None when the embedder is unavailable
            (a candidate missing from it has no similarity, as with ``semantic.get``).
        lexical_rank: 0-based rank in the lexical arm by item id.
        lexical_size: how many the lexical arm returned.
        query: the task's features.
        weights: the :func:`~memory_core.rules.scoring.weight_vector` of the query's weights.
    """
    columns = DirectiveColumns.of(index)
    ids = np.fromiter(candidate_ids, dtype=np.int64)
    rows = np.searchsorted(columns.ids, ids)
    nan = float("nan")
    id_list = ids.tolist()
    raw_sim = np.array(
        [nan] * len(id_list) if semantic is None else [semantic.get(i, nan) for i in id_list],
        dtype=np.float64,
    )
    ranks = np.array([lexical_rank.get(i, -1) for i in id_list], dtype=np.int64)

    # Set tests once per distinct code among the candidates.
    rule_codes = columns.rule[rows]
    known_rule = rule_codes >= 0
    authority_of = np.zeros(len(columns.rule_authority) + 1)  # the last slot: no rule
    for number in np.unique(rule_codes[known_rule]).tolist():
        if not columns.rule_authority[number].isdisjoint(query.topics):
            authority_of[number] = 1.0
    authority = authority_of[rule_codes]  # -1 reads the last slot (0)

    layer_match = _per_code(
        columns.layer[rows],
        (
            (
                number,
                1.0
                if columns.layers[number] == "*"
                or (query.layer is not None and columns.layers[number] == query.layer)
                else query.candidate_layer_match.get(columns.layers[number], 0.0),
            )
            for number in np.unique(columns.layer[rows]).tolist()
        ),
        len(columns.layers),
    )

    # overlap: round(shared / union, 4), 0 when both are empty (ints divide exactly alike).
    query_columns = [columns.topic_column[t] for t in query.topics if t in columns.topic_column]
    shared = columns.topic_members[rows][:, query_columns].sum(axis=1, dtype=np.int64)
    union = columns.topic_count[rows] + len(query.topics) - shared
    with np.errstate(invalid="ignore", divide="ignore"):
        overlap = np.where(union > 0, round4(shared / union), 0.0)

    condition_codes = columns.conditions[rows]
    wta_of = np.zeros(len(columns.condition_terms))
    which_of = np.full(len(columns.condition_terms), -1, dtype=np.int64)
    for number in np.unique(condition_codes).tolist():
        if not columns.condition_strong[number].isdisjoint(query.task_stems):
            wta_of[number], which_of[number] = when_to_apply_match(
                columns.condition_terms[number], query.task_stems
            )
    wta, which = wta_of[condition_codes], which_of[condition_codes]

    severity = columns.severity[rows]
    has_sim = ~np.isnan(raw_sim)
    # max(0, min(1, s)) rounded; + 0.0 turns a -0.0 into 0.0 as Python's max(0.0, -0.0) does.
    sim = np.where(
        has_sim,
        round4(np.minimum(np.maximum(np.where(has_sim, raw_sim, 0.0), 0.0), 1.0) + 0.0),
        0.0,
    )

    w_authority, w_wta, w_layer, w_overlap, w_severity, w_sim = weights
    total = round4(
        authority * w_authority
        + wta * w_wta
        + layer_match * w_layer
        + overlap * w_overlap
        + severity * w_severity
        + sim * w_sim
    )

    # relevance(): the same terms, added in the same order (adding 0.0 leaves a value as is).
    similarity = np.where(has_sim, raw_sim, 0.0) + 0.0  # `sim or 0.0`: -0.0 is 0.0
    relevance = np.maximum(similarity, 0.0) + 0.0
    in_lexical = ranks >= 0
    if lexical_size:
        relevance = relevance + np.where(
            in_lexical, LEXICAL_WEIGHT * (1.0 - ranks / max(lexical_size, 1)), 0.0
        )
    relevance = relevance + np.where(~has_sim & in_lexical, 0.25, 0.0)
    relevance = relevance + (STRUCTURE_WEIGHT * (0.5 * wta + 0.3 * authority) + 0.15 * overlap)
    return CandidateSignals(
        ids=ids,
        authority=authority,
        when_to_apply=wta,
        condition=which,
        layer_match=layer_match,
        overlap=overlap,
        severity=severity,
        semantic_sim=sim,
        relevance=round4(relevance),
        total=total,
        similarity=similarity,
        lexical_rank=ranks,
        must=columns.must[rows],
    )
