"""The deterministic hashing embedder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.embed import HashingEncoder, create_embedder, hash_embed

REPO = Path(__file__).resolve().parents[2]


def test_same_text_gives_the_same_vector() -> None:
    a = hash_embed(["Prefer composition over inheritance"])
    b = hash_embed(["Prefer composition over inheritance"])
    np.testing.assert_array_equal(a, b)


def test_vectors_are_stable_across_processes() -> None:
    # Python's hash() is salted per process; BLAKE2b is not. Compare a fresh interpreter.
    code = (
        "from memory_core.embed import hash_embed\n"
        "print(repr(hash_embed(['stable across processes'], 16)[0].tolist()))"
    )
    env_runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    ]
    assert env_runs[0] == env_runs[1]
    here = hash_embed(["stable across processes"], 16)[0].tolist()
    assert env_runs[0].strip() == repr(here)


@given(st.lists(st.text(max_size=200), max_size=8), st.integers(min_value=1, max_value=512))
@settings(max_examples=60, deadline=None)
def test_rows_are_unit_length_and_dim_is_respected(texts: list[str], dim: int) -> None:
    vectors = hash_embed(texts, dim)
    assert vectors.shape == (len(texts), dim)
    assert vectors.dtype == np.float32
    if texts:
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_different_texts_give_different_vectors() -> None:
    a, b, c = hash_embed(
        ["SQL injection prevention", "Use tabs for indentation", "sql injection prevention"]
    )
    assert not np.allclose(a, b)
    # Case folds away: the same words give the same vector.
    np.testing.assert_allclose(a, c)


def test_shared_words_score_higher_than_no_shared_words() -> None:
    query, near, far = hash_embed(
        ["validate user input", "always validate input from users", "the weather is sunny"]
    )
    assert float(query @ near) > float(query @ far)


def test_empty_text_still_has_a_unit_vector() -> None:
    (row,) = hash_embed([""])
    assert float(np.linalg.norm(row)) == pytest.approx(1.0)


def test_non_positive_dim_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        hash_embed(["x"], 0)
    with pytest.raises(ValueError, match="positive"):
        HashingEncoder(-3)


@pytest.mark.anyio
async def test_hash_spec_builds_an_always_ready_embedder() -> None:
    embedder = create_embedder("hash:256")
    assert embedder.is_ready()
    assert embedder.embedder_id == "hash:256"
    assert embedder.dimension == 256
    vectors = await embedder.embed_documents(["one", "two"])
    np.testing.assert_array_equal(vectors, hash_embed(["one", "two"], 256))
    assert (await embedder.embed_documents([])).shape == (0, 256)
