"""The candidate loop on numpy columns gives the per-candidate functions' values to the bit."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.rules.index import build_index
from memory_core.rules.persistence import DirectiveRow, RuleRow
from memory_core.rules.relevance import relevance
from memory_core.rules.rounding import round4
from memory_core.rules.scoring import (
    SPEC_WEIGHTS,
    QueryFeatures,
    content_stems,
    signal_values,
    total_of,
    weight_vector,
)
from memory_core.rules.signal_columns import candidate_signals


def _same(a: float, b: float) -> bool:
    """Equal to the bit (and both NaN counts as equal)."""
    return math.copysign(1.0, a) == math.copysign(1.0, b) and (
        a == b or (math.isnan(a) and math.isnan(b))
    )


# Values whose product with 10⁴ sits on, or a hair beside, a half-way point: where a plain
# rint(v × 10⁴) / 10⁴ (numpy's own round) and Python's round part ways.
_HALF_WAYS = st.integers(-(10**7), 10**7).flatmap(
    lambda n: st.sampled_from(
        [
            (n + 0.5) / 1e4,
            math.nextafter((n + 0.5) / 1e4, math.inf),
            math.nextafter((n + 0.5) / 1e4, -math.inf),
        ]
    )
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | _HALF_WAYS, max_size=40))
def test_round4_is_pythons_round_to_four_places_to_the_bit(values: list[float]) -> None:
    rounded = round4(np.array(values, dtype=np.float64)).tolist()
    assert all(_same(r, round(v, 4)) for r, v in zip(rounded, values, strict=True))


def test_numpy_rounding_alone_differs_from_python_where_round4_does_not() -> None:
    # The reason round4 exists: without its half-way fix-up, these come out different.
    values = np.array([2.67505, 0.00015, 1.00005, 0.12345, 8.50005])
    plain = (np.rint(values * 1e4) / 1e4).tolist()
    python = [round(float(v), 4) for v in values]
    assert plain != python
    assert round4(values).tolist() == python


_WORDS = ["schema", "migration", "login", "endpoint", "cache", "adding", "update", "token"]
_TOPICS = ["security", "database", "testing", "api", "logging", "performance"]
_LAYERS = ["*", "api", "data", "ui", ""]
_directive = st.fixed_dictionaries(
    {
        "rule": st.integers(0, 3),
        "severity": st.sampled_from(["MUST", "SHOULD", "MAY", "ODD"]),
        "layer": st.sampled_from(_LAYERS),
        "topics": st.lists(st.sampled_from(_TOPICS), max_size=3),
        "when": st.lists(
            st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join), max_size=2
        ),
        "semantic": st.none() | st.floats(-1.5, 1.5) | st.sampled_from([0.0, -0.0, 1.0]),
        "lexical": st.booleans(),
    }
)
_rule = st.fixed_dictionaries(
    {
        "authoritative_for": st.lists(st.sampled_from(_TOPICS), max_size=2),
        "when": st.lists(
            st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join), max_size=2
        ),
    }
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_directive, min_size=1, max_size=25),
    st.lists(_rule, min_size=3, max_size=3),  # rule 3 is not indexed: no rule
    st.lists(st.sampled_from(_WORDS), max_size=5),
    st.lists(st.sampled_from(_TOPICS), max_size=3),
    st.sampled_from([None, "api", "data"]),
    st.dictionaries(st.sampled_from(["api", "data", "ui"]), st.floats(0.01, 1.0), max_size=3),
    st.booleans(),
    st.dictionaries(st.sampled_from(sorted(SPEC_WEIGHTS)), st.floats(0.0, 20.0)),
)
def test_candidate_signals_match_the_per_candidate_functions(
    directives: list[dict[str, object]],
    rules: list[dict[str, list[str]]],
    task_words: list[str],
    topics: list[str],
    layer: str | None,
    layer_confidence: dict[str, float],
    semantic_ok: bool,
    weight_changes: dict[str, float],
) -> None:
    index = build_index(
        1,
        [
            DirectiveRow(
                item_id,
                f"d{item_id}",
                5,
                1,
                1,
                "rules.md",
                {
                    "rule_id": f"r{d['rule']}",
                    "severity": d["severity"],
                    "layer": d["layer"],
                    "topics": d["topics"],
                    "when_to_apply": d["when"],
                },
            )
            for item_id, d in enumerate(directives, start=1)
        ],
        [
            RuleRow(
                f"r{n}",
                f"r{n}",
                {"authoritative_for": r["authoritative_for"], "when_to_apply": r["when"]},
            )
            for n, r in enumerate(rules)
        ],
    )
    query = QueryFeatures(
        layer=layer,
        layer_confidence=layer_confidence,
        topics=frozenset(topics),
        task_stems=content_stems(" ".join(task_words)),
    )
    semantic = {
        item_id: float(d["semantic"])  # type: ignore[arg-type]
        for item_id, d in enumerate(directives, start=1)
        if d["semantic"] is not None
    }
    lexical_ids = [item_id for item_id, d in enumerate(directives, start=1) if d["lexical"]]
    lexical_rank = {item_id: rank for rank, item_id in enumerate(lexical_ids)}
    weights = dict(SPEC_WEIGHTS) | weight_changes
    candidates = list(reversed(index.directives))  # any order: rows follow it
    got = candidate_signals(
        index,
        candidates,
        semantic=semantic if semantic_ok else None,
        lexical_rank=lexical_rank,
        lexical_size=len(lexical_ids),
        query=query,
        weights=weight_vector(weights),
    )
    assert got.ids.tolist() == candidates
    for row, item_id in enumerate(candidates):
        directive = index.directives[item_id]
        rule = index.rules.get(directive.rule_id)
        sim = semantic.get(item_id) if semantic_ok else None
        values = signal_values(
            severity=directive.severity,
            layer=directive.layer,
            topics=directive.topic_set,
            conditions=directive.condition_terms,
            rule_authoritative_for=rule.authoritative_for if rule else frozenset(),
            semantic=sim,
            query=query,
        )
        assert all(_same(a, b) for a, b in zip(got.values(row), values, strict=True))
        expected_relevance = relevance(
            semantic=sim,
            lexical_rank=lexical_rank.get(item_id),
            lexical_size=len(lexical_ids),
            when_to_apply=values[1],
            authority=values[0],
            topic_overlap=values[4],
        )
        assert _same(float(got.relevance[row]), expected_relevance)
        assert _same(float(got.total[row]), total_of(values, weight_vector(weights)))
        assert _same(float(got.similarity[row]), sim or 0.0)
        assert int(got.lexical_rank[row]) == lexical_rank.get(item_id, -1)
        assert bool(got.must[row]) == (directive.severity == "MUST")
