"""The weighted score (Requirement 3) and the token budget (Requirement 4), as pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.errors import ConfigError
from memory_core.rules.context_block import pack_directives
from memory_core.rules.index import build_index
from memory_core.rules.models import RankedDirective, ScoreBreakdown
from memory_core.rules.persistence import DirectiveRow, RuleRow
from memory_core.rules.scoring import (
    SIGNALS,
    SPEC_WEIGHTS,
    QueryFeatures,
    condition_terms,
    content_stems,
    resolve_weights,
    score_directive,
    signal_values,
    total_of,
    weight_vector,
)
from memory_core.tokens import create_token_counter

COUNT = create_token_counter("tiktoken:o200k_base").count
QUERY = QueryFeatures(
    layer="2-Application",
    layer_confidence={"2-Application": 0.75, "4-Persistence": 0.25},
    topics=frozenset({"security", "authentication"}),
    task_stems=content_stems("add a login endpoint for user accounts"),
)


def _score(**overrides: object) -> ScoreBreakdown:
    args: dict[str, object] = {
        "severity": "MAY",
        "layer": "6-Docs",
        "topics": frozenset(),
        "conditions": (),
        "condition_texts": (),
        "rule_authoritative_for": frozenset(),
        "semantic": None,
        "query": QUERY,
        "weights": dict(SPEC_WEIGHTS),
    }
    args.update(overrides)
    return score_directive(**args)  # type: ignore[arg-type]


def test_baseline_is_severity_only() -> None:
    base = _score()
    assert base.total == pytest.approx(4.0)  # MAY = 1 point x 4
    assert (base.authority, base.when_to_apply, base.layer_match, base.topic_overlap) == (
        0,
        0,
        0,
        0,
    )


def test_authority_adds_ten_when_the_rule_is_authoritative_for_a_detected_topic() -> None:
    assert _score(rule_authoritative_for=frozenset({"authentication"})).total == pytest.approx(14)
    assert _score(rule_authoritative_for=frozenset({"migrations"})).total == pytest.approx(4)


def test_when_to_apply_adds_eight_when_a_condition_matches() -> None:
    condition = "Adding a login endpoint"
    full = _score(conditions=(condition_terms(condition),), condition_texts=(condition,))
    assert full.when_to_apply == 1.0
    assert full.total == pytest.approx(12)
    generic = _score(conditions=(condition_terms("Adding things"),), condition_texts=("x",))
    assert generic.when_to_apply == 0.0  # generic verbs alone do not count


def test_layer_match_adds_seven_for_the_detected_layer_or_the_wildcard() -> None:
    assert _score(layer="2-Application").total == pytest.approx(11)
    assert _score(layer="*").total == pytest.approx(11)
    secondary = _score(layer="4-Persistence")
    assert secondary.layer_match == pytest.approx(0.25 / 0.75, abs=1e-3)
    assert _score(layer="6-Docs").layer_match == 0


def test_topic_overlap_is_jaccard_times_five() -> None:
    scored = _score(topics=frozenset({"security", "logging"}))
    assert scored.topic_overlap == pytest.approx(1 / 3, abs=1e-3)
    assert scored.total == pytest.approx(4 + 5 / 3, abs=1e-3)


@pytest.mark.parametrize(("severity", "points"), [("MUST", 3), ("SHOULD", 2), ("MAY", 1)])
def test_severity_boost_is_three_two_one_times_four(severity: str, points: int) -> None:
    scored = _score(severity=severity)
    assert scored.severity_boost == points
    assert scored.total == pytest.approx(points * 4)


def test_semantic_similarity_adds_cosine_times_three() -> None:
    assert _score(semantic=0.5).total == pytest.approx(4 + 1.5)
    assert _score(semantic=-0.2).semantic_sim == 0


def test_full_score_is_the_spec_formula_and_explains_itself() -> None:
    condition = "Adding a login endpoint"
    scored = _score(
        severity="MUST",
        layer="2-Application",
        topics=frozenset({"security", "authentication"}),
        conditions=(condition_terms(condition),),
        condition_texts=(condition,),
        rule_authoritative_for=frozenset({"security"}),
        semantic=1.0,
    )
    assert scored.total == pytest.approx(10 + 8 + 7 + 5 + 12 + 3)
    assert len(scored.reasons) == 5
    assert scored.weights == dict(SPEC_WEIGHTS)


def test_weights_are_configurable_and_modes_shift_them() -> None:
    weights, warning = resolve_weights(None, configured={"semantic_sim": 6}, configured_modes={})
    assert weights["semantic_sim"] == 6 and warning is None
    architect, _ = resolve_weights("Architect", configured={}, configured_modes={})
    assert architect["layer_match"] > SPEC_WEIGHTS["layer_match"]
    custom, _ = resolve_weights(
        "review", configured={}, configured_modes={"review": {"authority": 1}}
    )
    assert custom["authority"] == 1
    default, unknown = resolve_weights("poet", configured={}, configured_modes={})
    assert default == dict(SPEC_WEIGHTS) and unknown and "unknown mode" in unknown
    with pytest.raises(ConfigError):
        resolve_weights(None, configured={"charisma": 3}, configured_modes={})


def _directive(
    index: int, severity: str = "SHOULD", words: int = 8, rule: str = "r"
) -> RankedDirective:
    zero = ScoreBreakdown(
        authority=0,
        when_to_apply=0,
        layer_match=0,
        topic_overlap=0,
        severity_boost=0,
        semantic_sim=0,
        weights={},
        total=0,
    )
    return RankedDirective(
        directive_id=f"d{index}",
        rule_id=f"{rule}{index % 3}",
        rule_title=f"Rule {index % 3}",
        text=" ".join(f"word{index}x{i}" for i in range(words)),
        severity=severity,  # type: ignore[arg-type]
        source_path="rules/x.md",
        line_start=index + 1,
        line_end=index + 2,
        section=["Rule", "Directives", "x"],
        score=100 - index,
        breakdown=zero,
    )


HEADER = "## Project rules for this task\n_Context: layer * · confidence 0.50_\n"


def test_stops_before_the_directive_that_would_exceed_the_budget() -> None:
    ranked = [_directive(i) for i in range(40)]
    packed = pack_directives(ranked, header=HEADER, budget=300, safety_cap=2000, count=COUNT)
    assert packed.tokens_used == COUNT(packed.context_block) <= 300
    assert 0 < len(packed.selected) < 40
    assert packed.dropped_for_budget == 40 - len(packed.selected)
    # Greedy by score: what was kept is a prefix of the ranking.
    assert [d.directive_id for d in packed.selected] == [
        f"d{i}" for i in range(len(packed.selected))
    ]


def test_packing_stops_at_a_directive_that_does_not_fit_and_never_skips_past_it() -> None:
    # d1 is long and does not fit after d0; d2 is short and would. The spec's order holds:
    # a lower-ranked directive never takes the place of a higher-ranked one.
    ranked = [_directive(0, words=8), _directive(1, words=200), _directive(2, words=3)]
    alone = pack_directives(
        [ranked[0], ranked[2]], header=HEADER, budget=900, safety_cap=2000, count=COUNT
    )
    budget = alone.tokens_used + 5  # d0 and d2 fit together; d1 fits with neither
    packed = pack_directives(ranked, header=HEADER, budget=budget, safety_cap=2000, count=COUNT)
    assert [d.directive_id for d in packed.selected] == ["d0"]
    assert packed.dropped_for_budget == 2


def test_each_directive_in_the_block_carries_its_reason() -> None:
    ranked = [_directive(0).model_copy(update={"reason": "mentions alembic, migration"})]
    packed = pack_directives(ranked, header=HEADER, budget=900, safety_cap=2000, count=COUNT)
    assert "[1] _(mentions alembic, migration)_" in packed.context_block


def test_top_three_must_directives_are_always_included_up_to_the_safety_cap() -> None:
    ranked = [_directive(i, "SHOULD") for i in range(3)] + [
        _directive(i, "MUST", words=60) for i in range(3, 8)
    ]
    packed = pack_directives(ranked, header=HEADER, budget=50, safety_cap=2000, count=COUNT)
    forced = [d.directive_id for d in packed.selected if d.forced]
    assert forced == ["d3", "d4", "d5"]
    assert packed.forced_must == 3
    assert len(packed.selected) == 3  # nothing else once over budget
    assert 50 < packed.tokens_used <= 2000

    capped = pack_directives(ranked, header=HEADER, budget=50, safety_cap=200, count=COUNT)
    assert capped.tokens_used <= 200
    assert capped.forced_must < 3


def test_breadcrumbs_and_citations() -> None:
    ranked = [_directive(i) for i in range(3)]
    plain = pack_directives(ranked, header=HEADER, budget=900, safety_cap=2000, count=COUNT)
    crumbs = pack_directives(
        ranked, header=HEADER, budget=900, safety_cap=2000, count=COUNT, include_breadcrumbs=True
    )
    assert "_source: rules/x.md:1-2" in crumbs.context_block
    assert "_source:" not in plain.context_block
    assert [c.ref for c in crumbs.citations] == [1, 2, 3]
    for directive in crumbs.selected:
        assert f"[{directive.ref}]" in crumbs.context_block
        citation = crumbs.citations[directive.ref - 1]
        assert citation.directive_id == directive.directive_id
        assert citation.line_start == directive.line_start
    assert crumbs.context_block.startswith("## Project rules for this task")
    assert "### Rule 0" in crumbs.context_block


@settings(max_examples=150, deadline=None)
@given(
    severities=st.lists(st.sampled_from(["MUST", "SHOULD", "MAY"]), min_size=0, max_size=25),
    words=st.lists(st.integers(min_value=1, max_value=80), min_size=25, max_size=25),
    budget=st.integers(min_value=1, max_value=1500),
    cap=st.integers(min_value=1, max_value=2500),
)
def test_packer_never_exceeds_the_budget_except_for_forced_musts(
    severities: list[str], words: list[int], budget: int, cap: int
) -> None:
    ranked = [_directive(i, s, words[i]) for i, s in enumerate(severities)]
    packed = pack_directives(ranked, header=HEADER, budget=budget, safety_cap=cap, count=COUNT)
    assert packed.tokens_used == COUNT(packed.context_block)
    if packed.forced_must:
        assert packed.tokens_used <= max(budget, cap)
    else:
        assert packed.tokens_used <= budget
    assert len({d.directive_id for d in packed.selected}) == len(packed.selected)


@given(
    st.tuples(*(st.floats(0, 3, allow_nan=False) for _ in range(7))),
    st.dictionaries(st.sampled_from(SIGNALS), st.floats(0, 50, allow_nan=False)),
)
def test_a_weight_vector_totals_exactly_like_its_mapping(
    values: tuple[float, ...], weights: dict[str, float]
) -> None:
    signals = (*values[:2], 0, *values[3:])
    assert total_of(signals, weight_vector(weights)) == total_of(signals, weights)  # type: ignore[arg-type]


_CONDITION_WORDS = ["adding", "schema", "migration", "login", "endpoint", "update", "cache", "new"]
_conditions = st.lists(
    st.lists(st.sampled_from(_CONDITION_WORDS), min_size=1, max_size=3).map(" ".join),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(_conditions, _conditions, st.lists(st.sampled_from(_CONDITION_WORDS), max_size=4))
def test_the_index_strong_stems_short_cut_finds_what_matching_each_condition_finds(
    own: list[str], of_rule: list[str], task_words: list[str]
) -> None:
    index = build_index(
        1,
        [DirectiveRow(1, "d1", 5, 1, 1, "rules.md", {"rule_id": "r1", "when_to_apply": own})],
        [RuleRow("r1", "r1", {"when_to_apply": of_rule})],
    )
    directive = index.directives[1]
    # The set the index keeps: every strong (non-generic) stem of the directive's own and its
    # rule's conditions.
    assert directive.condition_strong == {
        s for terms in directive.condition_terms for s, w in terms if w == 1.0
    }
    query = QueryFeatures(
        layer=None,
        layer_confidence={},
        topics=frozenset(),
        task_stems=content_stems(" ".join(task_words)),
    )
    common = {
        "severity": "SHOULD",
        "layer": "",
        "topics": frozenset[str](),
        "conditions": directive.condition_terms,
        "rule_authoritative_for": frozenset[str](),
        "semantic": None,
        "query": query,
    }
    assert signal_values(**common, condition_strong=directive.condition_strong) == (  # type: ignore[arg-type]
        signal_values(**common)  # type: ignore[arg-type]
    )
