"""Metadata enrichment of a new memory: tags, entities, keyphrases and their confidence. Pure.

Spec ("Metadata Enrichment"): when metadata is sparse, run named-entity recognition and
keyphrase extraction; ``metadata_confidence`` is the average detector confidence, clamped to
[0, 1]. The detectors are offline and deterministic:

- entities: capitalised names (not a sentence's first word alone), code in backticks, file
  paths, @mentions and #hashtags, weekdays, months, clock times and dates;
- keyphrases: RAKE (rapid automatic keyword extraction): runs of content words between
  stopwords and punctuation, scored by word degree over frequency.

Each detection carries the detector's confidence (how often that detector is right on text
like this: a backticked identifier is almost surely a name, a capitalised word less so).
Tags are the caller's tags first, then the category (preference, commitment, goal), then the
strongest entities and keyphrases, lower-cased, at most :data:`MAX_TAGS`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from memory_core.errors import InvalidInputError
from memory_core.llm.keyphrases import STOPWORDS, key_words, sentences

__all__ = [
    "MAX_TAGS",
    "Enrichment",
    "clean_tags",
    "enrich",
    "extractive_summary",
    "merge_unique",
]

MAX_TAGS = 8
_MAX_TAG_CHARS = 64
_TAG = re.compile(r"[^\w:/.#@+-]+", re.UNICODE)

_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_PATH = re.compile(
    r"(?<![\w/])(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|ts|tsx|js|jsx|go|rs|java|rb|md|toml|yaml|yml|json|sql|sh|c|h|cpp|cs|kt|swift)\b"
)
_MENTION = re.compile(r"(?<!\w)[@#][A-Za-z][\w-]{1,40}")
_WEEKDAY = re.compile(
    r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b", re.IGNORECASE
)
_MONTH = re.compile(
    r"\b(january|february|march|april|june|july|august|september|october|november|december)\b",
    re.IGNORECASE,
)
_TIME = re.compile(r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b|\b\d{1,2}:\d{2}\b", re.IGNORECASE)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z0-9]+(?:[ -][A-Z][a-zA-Z0-9]+)*\b")
_RAKE_SPLIT = re.compile(r"[^\w' -]+|\s-\s", re.UNICODE)
_RAKE_WORD = re.compile(r"[a-z][a-z0-9'-]+")
_CONFIDENCE = {
    "backtick": 0.95,
    "path": 0.9,
    "mention": 0.9,
    "time": 0.9,
    "weekday": 0.85,
    "month": 0.8,
    "date": 0.95,
    "name_multi": 0.8,
    "name": 0.6,
    "phrase_multi": 0.65,
    "phrase": 0.5,
}
# Words that are capitalised for grammar, not because they name something.
_NOT_NAMES = frozenset({"i", "i'm", "i've", "i'll", "i'd", "ok", "okay"}) | STOPWORDS


@dataclass(frozen=True, slots=True)
class Enrichment:
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    keyphrases: tuple[str, ...]
    metadata_confidence: float


def _tag(value: str) -> str:
    return _TAG.sub("-", value.strip().lower()).strip("-")[:_MAX_TAG_CHARS]


def clean_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Caller tags lower-cased, spaces to dashes, duplicates dropped (order kept).

    Raises:
        InvalidInputError: a tag is empty after cleaning.
    """
    cleaned: list[str] = []
    for raw in tags:
        for part in str(raw).split(","):
            if not part.strip():
                continue
            tag = _tag(part)
            if not tag:
                raise InvalidInputError(
                    f"tag {part[:40]!r} has no letters or digits",
                    hint="use tags such as 'preferences' or 'project:api'",
                )
            cleaned.append(tag)
    return tuple(dict.fromkeys(cleaned))


def merge_unique(*groups: Iterable[str]) -> tuple[str, ...]:
    """Every value once, in first-seen order."""
    return tuple(dict.fromkeys(v for group in groups for v in group if v))


def _entities(text: str) -> list[tuple[str, float]]:
    found: list[tuple[str, float]] = []
    masked = text
    for pattern, kind in ((_BACKTICK, "backtick"), (_PATH, "path"), (_MENTION, "mention")):
        for match in pattern.finditer(masked):
            value = match.group(1) if pattern is _BACKTICK else match.group(0)
            found.append((value, _CONFIDENCE[kind]))
        masked = pattern.sub(" ", masked)
    for pattern, kind in (
        (_DATE, "date"),
        (_TIME, "time"),
        (_WEEKDAY, "weekday"),
        (_MONTH, "month"),
    ):
        for match in pattern.finditer(masked):
            value = match.group(1) if pattern in (_WEEKDAY, _MONTH) else match.group(0)
            found.append((value.lower(), _CONFIDENCE[kind]))
        masked = pattern.sub(" ", masked)
    for sentence in sentences(masked) or [masked]:
        for match in _CAPITALISED.finditer(sentence):
            name = match.group(0)
            words = re.split(r"[ -]", name)
            if all(w.lower() in _NOT_NAMES for w in words):
                continue
            first_word = match.start() == len(sentence) - len(sentence.lstrip())
            if len(words) == 1 and (first_word or name.lower() in _NOT_NAMES):
                continue  # a sentence's first word is capitalised anyway
            found.append((name, _CONFIDENCE["name_multi" if len(words) > 1 else "name"]))
    unique: dict[str, tuple[str, float]] = {}
    for value, confidence in found:
        key = value.lower()
        if key not in unique or unique[key][1] < confidence:
            unique[key] = (value, confidence)
    return list(unique.values())


def _keyphrases(normalised: str, limit: int = 3) -> list[tuple[str, float]]:
    phrases: list[list[str]] = []
    for chunk in _RAKE_SPLIT.split(normalised):
        current: list[str] = []
        for word in chunk.split():
            if _RAKE_WORD.fullmatch(word) and word not in STOPWORDS and len(word) > 2:
                current.append(word)
            elif current:
                phrases.append(current)
                current = []
        if current:
            phrases.append(current)
    phrases = [p[:3] for p in phrases]
    frequency: Counter[str] = Counter(w for p in phrases for w in p)
    degree: Counter[str] = Counter()
    for phrase in phrases:
        for word in phrase:
            degree[word] += len(phrase)
    scored: dict[str, float] = {}
    for phrase in phrases:
        text = " ".join(phrase)
        scored[text] = max(scored.get(text, 0.0), sum(degree[w] / frequency[w] for w in phrase))
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1], normalised.find(kv[0])))
    return [
        (text, _CONFIDENCE["phrase_multi" if " " in text else "phrase"])
        for text, _ in ranked[:limit]
    ]


def enrich(text: str, normalised: str, *, tags: Sequence[str], category: str | None) -> Enrichment:
    """Entities, keyphrases, tags and ``metadata_confidence`` of one memory.

    Entities are read from the original text (capitals mark names); keyphrases from the
    normalised text.
    """
    entities = _entities(text)
    phrases = _keyphrases(normalised)
    detections = [c for _, c in entities] + [c for _, c in phrases]
    confidence = sum(detections) / len(detections) if detections else 0.0
    strongest = sorted(entities, key=lambda e: -e[1])
    derived = [_tag(v) for v, _ in strongest[:3]] + [_tag(p) for p, _ in phrases[:2]]
    label = [category] if category in ("preference", "commitment", "goal") else []
    merged = merge_unique(tags, label, (d for d in derived if d))
    return Enrichment(
        tags=merged[: max(MAX_TAGS, len(tags))],
        entities=tuple(v for v, _ in entities),
        keyphrases=tuple(p for p, _ in phrases),
        metadata_confidence=round(min(1.0, max(0.0, confidence)), 4),
    )


def extractive_summary(
    text: str, *, max_tokens: int, count: Callable[[str], int], truncate: Callable[[str, int], str]
) -> str:
    """The sentences richest in the text's key words, in text order, within ``max_tokens``."""
    parts = sentences(text)
    if len(parts) <= 1:
        return truncate(text, max_tokens)
    keys = set(key_words(text, limit=12))
    ranked = sorted(
        range(len(parts)),
        key=lambda i: (-len(keys & set(key_words(parts[i], limit=50))), i),
    )
    chosen: list[int] = []
    used = 0
    for index in ranked:
        cost = count(parts[index]) + (1 if chosen else 0)
        if used + cost > max_tokens:
            continue
        chosen.append(index)
        used += cost
    if not chosen:
        return truncate(parts[ranked[0]], max_tokens)
    return " ".join(parts[i] for i in sorted(chosen))
