"""A deterministic feature-hashing embedder: for tests, and as a last resort offline.

It knows no semantics (synonyms score as unrelated), but texts that share words and
spellings land close together, it needs nothing installed, and its vectors are the same
in every process and on every machine, so they can be stored and compared later.

Features are lowercased word unigrams plus character trigrams (over the lowercased
text with whitespace collapsed and a space added at each end), each hashed with
BLAKE2b into one of ``dim`` buckets with a sign taken from another bit of the digest
(the "hashing trick" with signed buckets, which keeps collisions unbiased). Python's
``hash()`` is salted per process, so it is never used.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

__all__ = ["DEFAULT_HASH_DIMENSION", "HashingEncoder", "hash_embed"]

DEFAULT_HASH_DIMENSION = 384

_WORD = re.compile(r"\w+")
_SPACES = re.compile(r"\s+")
# Trigrams are many and partly redundant with words; weigh them lower.
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5
# Every text also gets this small feature, so that even the empty text has a direction.
_BIAS_FEATURE = "\x00bias"
_BIAS_WEIGHT = 0.1


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    sign = 1.0 if value >> 63 == 0 else -1.0
    return value % dim, sign


def _features(text: str) -> list[tuple[str, float]]:
    lowered = text.lower()
    features = [(_BIAS_FEATURE, _BIAS_WEIGHT)]
    features.extend(("w:" + word, _WORD_WEIGHT) for word in _WORD.findall(lowered))
    collapsed = " " + _SPACES.sub(" ", lowered).strip() + " "
    features.extend(
        ("c:" + collapsed[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(collapsed) - 2)
    )
    return features


def hash_embed(texts: Sequence[str], dim: int = DEFAULT_HASH_DIMENSION) -> np.ndarray:
    """Embed ``texts`` by signed feature hashing (pure, deterministic across processes).

    Args:
        texts: the texts.
        dim: number of buckets (vector length), positive.

    Returns:
        ``(len(texts), dim)`` float32 array with unit-length rows.

    Raises:
        ValueError: ``dim`` is not positive.
    """
    if dim <= 0:
        raise ValueError(f"hash embedding dimension must be positive, got {dim}")
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        vector = out[row]
        for feature, weight in _features(text):
            index, sign = _slot(feature, dim)
            vector[index] += sign * weight
        norm = float(np.linalg.norm(vector))
        if norm > 0.0:
            vector /= norm
        else:
            # Signed collisions cancelled everything out (only plausible for a tiny dim):
            # use the bias bucket so the row is still a unit vector.
            vector[_slot(_BIAS_FEATURE, dim)[0]] = 1.0
    return out


class HashingEncoder:
    """:func:`hash_embed` as a :class:`~memory_core.embed.base.LocalEncoder` (always ready).

    Args:
        dim: vector length (number of buckets).

    Raises:
        ValueError: ``dim`` is not positive.
    """

    def __init__(self, dim: int = DEFAULT_HASH_DIMENSION) -> None:
        if dim <= 0:
            raise ValueError(f"hash embedding dimension must be positive, got {dim}")
        self._dim = dim

    def __repr__(self) -> str:
        return f"HashingEncoder(dim={self._dim})"

    @property
    def system(self) -> str:
        return "hash"

    @property
    def model_name(self) -> str:
        return str(self._dim)

    @property
    def dimension(self) -> int:
        return self._dim

    @property
    def max_input_tokens(self) -> int | None:
        return None

    def is_ready(self) -> bool:
        return True

    def start_loading(self) -> None:
        return None

    def load_sync(self) -> None:
        return None

    async def ensure_loaded(self) -> None:
        return None

    def embed_counted_sync(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        return hash_embed(texts, self._dim), sum(self.count_tokens_sync(t) for t in texts)

    def count_tokens_sync(self, text: str) -> int:
        """Words in ``text`` (the unit this embedder hashes)."""
        return len(_WORD.findall(text))
