"""Text handling of the write path: normalisation, the forget digest, 64-bit SimHash. Pure.

Spec ("Normalization"): lowercase, remove URLs and citations, fold whitespace, before
near-duplicate detection. The stored text stays as the user wrote it; the normalised form
only feeds the SimHash and the digest, so "Use pnpm." and "use  pnpm [1]" are one memory.

SimHash (Charikar): every feature (word unigrams and bigrams of the normalised text) is hashed
to 64 bits; bit i of the fingerprint is set when the features whose hash has bit i set
outweigh those that do not. Near-identical texts get fingerprints a few bits apart; the store
finds Hamming distance <= 3 through a band index (``ItemRepository.near_simhash``).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import Counter

import numpy as np

__all__ = ["hamming", "normalise", "simhash64", "text_digest", "word_tokens"]

_URL = re.compile(r"(?:https?://|ftp://|www\.)\S+", re.IGNORECASE)
# Numeric citations [1], [2, 3], [4-6]; fullwidth 【source】 markers; (Author et al., 2020).
_CITATION = re.compile(
    r"\[\s*\d+(?:\s*[,;\u2013-]\s*\d+)*\s*\]|\u3010[^\u3011]*\u3011|"
    r"\(\s*[A-Z][A-Za-z'\u2019-]+(?:\s+et al\.?)?,?\s+\d{4}[a-z]?\s*\)"
)
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
_SPACE = re.compile(r"\s+")
_BITS = np.uint64(1) << np.arange(64, dtype=np.uint64)


def normalise(text: str) -> str:
    """Lowercased, URLs and citations removed, whitespace folded (the spec's normalisation)."""
    without = _CITATION.sub(" ", _URL.sub(" ", text))
    return _SPACE.sub(" ", without.lower()).strip()


def text_digest(normalised: str) -> str:
    """The forget tombstone's key: sha256 of the normalised text (never the text itself)."""
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def word_tokens(normalised: str) -> list[str]:
    return _WORD.findall(normalised)


def _feature_hash(feature: str) -> int:
    return int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")


def simhash64(normalised: str) -> int:
    """The 64-bit SimHash of normalised text (unsigned; 0 for text without words).

    Features are word unigrams (weight 1) and bigrams (weight 1), so word order matters a
    little and a single changed word moves only its own features.
    """
    words = word_tokens(normalised)
    if not words:
        return 0
    features: Counter[str] = Counter(words)
    features.update(f"{a} {b}" for a, b in itertools.pairwise(words))
    hashes = np.array([_feature_hash(f) for f in features], dtype=np.uint64)
    weights = np.array(list(features.values()), dtype=np.int64)
    bits = (hashes[:, None] & _BITS[None, :]) != 0
    votes = (np.where(bits, 1, -1) * weights[:, None]).sum(axis=0)
    return int(sum(1 << i for i in range(64) if votes[i] > 0))


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()
