"""Normalisation, the forget digest and SimHash (spec "Write Path Policy": normalisation and
near-duplicate detection)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory_core.memories.text import hamming, normalise, simhash64, text_digest


def test_normalisation_lowercases_drops_urls_and_citations_and_folds_whitespace() -> None:
    raw = "Deploys use  Blue-Green\n(see https://wiki.example.com/deploys [2], [3-4]) 【src】"
    assert normalise(raw) == "deploys use blue-green (see , )"
    assert normalise("Per the paper (Smith et al., 2020) it works") == "per the paper it works"


def test_the_digest_is_of_the_normalised_text() -> None:
    assert text_digest(normalise("Use PNPM.")) == text_digest(normalise("use   pnpm."))
    assert text_digest(normalise("use pnpm")) != text_digest(normalise("use npm"))


def test_variants_that_normalise_alike_are_zero_bits_apart() -> None:
    a = simhash64(normalise("I prefer pnpm over npm for this repo [1]"))
    b = simhash64(normalise("i  prefer PNPM over npm for this repo https://x.y/z"))
    assert hamming(a, b) == 0


def test_different_facts_are_far_apart() -> None:
    a = simhash64(normalise("The weekly sync is on Tuesdays at 10am"))
    b = simhash64(normalise("Staging runs Postgres 16 with pgvector"))
    assert hamming(a, b) > 10


def test_punctuation_and_quoting_do_not_move_the_hash() -> None:
    a = simhash64(normalise('Deploys need "two" approvals; always.'))
    b = simhash64(normalise("deploys need two approvals, always!"))
    assert hamming(a, b) == 0


def test_one_changed_word_moves_a_long_text_less_than_a_different_text() -> None:
    base = (
        "We deploy the billing service with blue green switching every Friday after the release "
        "review meeting with the platform team and the on call engineer"
    )
    changed = simhash64(normalise(base.replace("engineer", "person")))
    other = simhash64(normalise("Staging runs Postgres 16 with pgvector and nightly backups"))
    assert hamming(simhash64(normalise(base)), changed) < hamming(simhash64(normalise(base)), other)


@given(st.text(max_size=200))
def test_simhash_is_deterministic_and_64_bit(text: str) -> None:
    value = simhash64(normalise(text))
    assert value == simhash64(normalise(text))
    assert 0 <= value < 1 << 64
