"""Key words, sentence splitting and word overlap for the offline model. Pure, deterministic."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

__all__ = [
    "STOPWORDS",
    "key_terms",
    "key_words",
    "overlap",
    "sentences",
    "stem",
    "word_stems",
]

_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n\s*\n")

_STOPWORD_TEXT = """
    about above after again against all also although among and another any are around aren
    because been before being below between both but can cannot could did didn does doesn
    doing done down during each either else even ever every few for from further get gets got
    had hadn has hasn have haven having her here hers herself him himself his how however into
    its itself just least less like made make many may might mine more most much must myself
    near neither never nor not now off once one only onto other others ought our ours
    ourselves out over own per perhaps quite rather really same say said says shall shan she
    should shouldn since some still such than that the their theirs them themselves then there
    these they thing things this those though through thus till too toward towards under until
    upon very was wasn way well were weren what whatever when where whether which while who
    whom whose why will with within without won would wouldn yes yet you your yours yourself
    yourselves unto thee thou thy thine hath doth shalt upon unto whom therefore wherein
    whereof thereof herein hereby two three first last new old great little long good
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def word_stems(text: str) -> list[str]:
    """Lowercased words of 3+ letters without stopwords, with a light plural/-ing folding."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def stem(word: str) -> str:
    """The light plural/-ing folding :func:`word_stems` applies to one lowercased word."""
    return _stem(word)


def _stem(word: str) -> str:
    # Enough folding that "whales" meets "whale" and "sailing" meets "sail"; not a real stemmer.
    for suffix in ("ing", "ies", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "ies":
                return word[: -len(suffix)] + "y"
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: -len(suffix)]
    return word


def _ranked(text: str, exclude: Iterable[str]) -> list[tuple[str, str]]:
    """(stem, most frequent spelling) by frequency, ties broken by first appearance."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
    excluded = {_stem(w.lower()) for w in exclude}
    counts: Counter[str] = Counter()
    spellings: dict[str, Counter[str]] = {}
    first: dict[str, int] = {}
    for index, word in enumerate(words):
        stem = _stem(word)
        counts[stem] += 1
        spellings.setdefault(stem, Counter())[word] += 1
        first.setdefault(stem, index)
    ranked = sorted((s for s in counts if s not in excluded), key=lambda s: (-counts[s], first[s]))
    return [(s, min(spellings[s].items(), key=lambda kv: (-kv[1], kv[0]))[0]) for s in ranked]


def key_words(text: str, limit: int = 10, *, exclude: Iterable[str] = ()) -> list[str]:
    """The most frequent content words as stems (for matching), ties by first appearance."""
    return [stem for stem, _ in _ranked(text, exclude)[:limit]]


def key_terms(text: str, limit: int = 10, *, exclude: Iterable[str] = ()) -> list[str]:
    """The same words as :func:`key_words`, spelled as they most often appear (for names)."""
    return [spelling for _, spelling in _ranked(text, exclude)[:limit]]


def overlap(words: Iterable[str], reference: Iterable[str]) -> float:
    """Share of ``words`` (stems) found in ``reference`` (stems); 0 when ``words`` is empty."""
    wanted = set(words)
    if not wanted:
        return 0.0
    return len(wanted & set(reference)) / len(wanted)


def sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split after . ! ? ; and at blank lines), stripped, non-empty."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
