"""The short reason each directive of a block carries reads as words, never a cut word."""

from __future__ import annotations

from memory_core.rules.relevance import short_reason


def _reason(condition: str) -> str:
    return short_reason(
        shared_words=(), condition=condition, authority_topics=(), topics=(), semantic=None
    )


def test_a_long_condition_is_cut_at_a_word_boundary() -> None:
    reason = _reason("Adding or changing an HTTP endpoint that accepts a request body")

    assert reason == "when Adding or changing an HTTP…"
    assert _reason("Adding or changing an endpoint") == "when Adding or changing an…"
    assert len(reason) <= len("when ") + 28


def test_a_short_condition_is_kept_whole() -> None:
    assert _reason("Writing a migration") == "when Writing a migration"


def test_one_long_word_is_cut_rather_than_dropped() -> None:
    reason = _reason("x" * 60)

    assert reason.startswith("when xxxx") and reason.endswith("…")
