"""Context detection: which layer, topics and technologies a task description is about.

Pure: a task and compiled :class:`~memory_core.rules.dictionaries.Dictionaries` in, a
:class:`~memory_core.rules.models.DetectedContext` out. Matching works on word tokens: phrases
first ("unit test", "business logic"), then single words exactly, by stem ("migrations" →
"migration") or, for longer words, by edit distance ("authentification"), which costs a little
confidence. :class:`DetectionCache` keeps results for a few minutes (Requirement 10.4).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from memory_core.errors import InvalidInputError
from memory_core.rules.dictionaries import Dictionaries, Hit, tokenize
from memory_core.rules.models import DetectedContext, LayerCandidate
from memory_core.rules.topics import stem, topic_parents

__all__ = [
    "LOW_CONFIDENCE",
    "VERY_LOW_CONFIDENCE",
    "DetectionCache",
    "detect_context",
    "extract_keywords",
    "validate_task",
]

LOW_CONFIDENCE = 0.6
VERY_LOW_CONFIDENCE = 0.3
_FUZZY_WEIGHT = 0.8
_PARENT_WEIGHT = 0.5
_PHRASE_WEIGHT = 1.5

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "else",
        "when",
        "while",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "without",
        "into",
        "onto",
        "over",
        "under",
        "about",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "me",
        "us",
        "my",
        "our",
        "your",
        "their",
        "them",
        "do",
        "does",
        "did",
        "done",
        "so",
        "such",
        "not",
        "no",
        "nor",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "have",
        "has",
        "had",
        "having",
        "than",
        "too",
        "very",
        "just",
        "also",
        "only",
        "all",
        "any",
        "each",
        "every",
        "some",
        "more",
        "most",
        "other",
        "another",
        "same",
        "own",
        "both",
        "either",
        "neither",
        "there",
        "here",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "why",
        "how",
        "please",
        "make",
        "sure",
        "new",
        "using",
        "use",
        "via",
        "per",
        "up",
        "down",
        "out",
        "off",
        "again",
        "further",
        "once",
        "get",
        "gets",
        "got",
        "let",
        "lets",
        "need",
        "needs",
        "want",
        "wants",
    ]
)
_ACTION_WORDS = frozenset(
    [
        "add",
        "adding",
        "implement",
        "implementing",
        "create",
        "creating",
        "build",
        "building",
        "fix",
        "fixing",
        "refactor",
        "refactoring",
        "write",
        "writing",
        "update",
        "updating",
        "remove",
        "removing",
        "delete",
        "deleting",
        "rename",
        "migrate",
        "migrating",
        "test",
        "testing",
        "debug",
        "debugging",
        "deploy",
        "deploying",
        "optimize",
        "optimise",
        "review",
        "reviewing",
        "document",
        "documenting",
        "design",
        "designing",
        "validate",
        "validating",
        "secure",
        "securing",
        "configure",
        "configuring",
        "upgrade",
        "upgrading",
        "integrate",
        "integrating",
        "expose",
        "exposing",
        "handle",
        "handling",
        "store",
        "storing",
        "log",
        "logging",
        "cache",
        "caching",
        "speed",
        "improve",
        "improving",
        "change",
        "changing",
    ]
)


def validate_task(task: str | None, *, max_chars: int) -> str:
    """Check a task description and return it stripped.

    Raises:
        InvalidInputError: the task is None, empty, whitespace or longer than ``max_chars``.
    """
    if task is None or not str(task).strip():
        raise InvalidInputError(
            "the task description is empty",
            hint="pass a sentence describing the coding task, e.g. 'add a login endpoint'",
        )
    text = str(task).strip()
    if len(text) > max_chars:
        raise InvalidInputError(
            f"the task description is {len(text)} characters, over the {max_chars} limit",
            hint="summarise the task in a few sentences, or raise rules.max_task_chars",
        )
    return text


def extract_keywords(tokens: list[str], limit: int = 24) -> list[str]:
    """Action words and domain terms: tokens that are not stopwords, first-seen order."""
    seen: dict[str, None] = {}
    for token in tokens:
        if token in STOPWORDS or len(token) < 2 or token.isdigit():
            continue
        seen.setdefault(token, None)
        if len(seen) >= limit:
            break
    # Actions first: they say what is being done, the rest what it is done to.
    return sorted(seen, key=lambda t: 0 if t in _ACTION_WORDS else 1)


@dataclass
class _Evidence:
    weight: float = 0.0
    matched: list[str] | None = None

    def add(self, weight: float, word: str) -> None:
        self.weight += weight
        if self.matched is None:
            self.matched = []
        if word not in self.matched:
            self.matched.append(word)


def _collect(
    tokens: list[str], tables: Dictionaries
) -> tuple[dict[tuple[str, str], _Evidence], bool]:
    evidence: dict[tuple[str, str], _Evidence] = {}
    consumed = [False] * len(tokens)
    stems = [stem(t) for t in tokens]
    used_fuzzy = False

    def credit(hits: list[Hit], weight: float, word: str) -> None:
        for hit in hits:
            evidence.setdefault((hit.category, hit.name), _Evidence()).add(weight, word)

    for size in range(min(tables.max_phrase, 4), 1, -1):
        for start in range(len(tokens) - size + 1):
            if any(consumed[start : start + size]):
                continue
            hits = tables.phrases.get(tuple(stems[start : start + size]))
            if hits:
                # A phrase ("unit test") is more specific than any of its words.
                credit(hits, _PHRASE_WEIGHT, " ".join(tokens[start : start + size]))
                for i in range(start, start + size):
                    consumed[i] = True
    for index, token in enumerate(tokens):
        if consumed[index] or token in STOPWORDS:
            continue
        hits, fuzzy = tables.lookup(token)
        if hits:
            used_fuzzy = used_fuzzy or fuzzy
            credit(hits, _FUZZY_WEIGHT if fuzzy else 1.0, token)
    return evidence, used_fuzzy


def _ranked(
    evidence: dict[tuple[str, str], _Evidence], category: str
) -> list[tuple[str, _Evidence]]:
    found = [(name, ev) for (cat, name), ev in evidence.items() if cat == category]
    found.sort(key=lambda item: (-item[1].weight, item[0]))
    return found


def detect_context(
    task: str, tables: Dictionaries, *, return_keywords: bool = False
) -> DetectedContext:
    """Detect layer, topics, languages, frameworks and platforms of a (validated) task.

    Confidence combines how clearly one layer wins (its share of the layer evidence, damped
    when there is a single weak hit) with how much topic and technology evidence there is.
    Below 0.6 the result carries a warning; below 0.3 a prominent one (Requirements 2.6, 11.3).

    Args:
        task: the task description (already validated).
        tables: compiled dictionaries for the scope.
        return_keywords: also return the task's action words and domain terms.

    Returns:
        The detected context.
    """
    tokens = tokenize(task)
    evidence, used_fuzzy = _collect(tokens, tables)

    layers = _ranked(evidence, "layer")
    layer_total = sum(ev.weight for _, ev in layers)
    candidates = [
        LayerCandidate(
            layer=name,
            confidence=round(ev.weight / layer_total, 3),
            matched=list(ev.matched or []),
        )
        for name, ev in layers
    ]
    detected_layer = layers[0][0] if layers else None

    topic_weights: dict[str, float] = {name: ev.weight for name, ev in _ranked(evidence, "topic")}
    for name, weight in list(topic_weights.items()):
        for parent in topic_parents(name):
            topic_weights[parent] = max(topic_weights.get(parent, 0.0), weight * _PARENT_WEIGHT)
    topics = [t for t, _ in sorted(topic_weights.items(), key=lambda kv: (-kv[1], kv[0]))]

    languages = [name for name, _ in _ranked(evidence, "language")]
    frameworks = [name for name, _ in _ranked(evidence, "framework")]
    platforms = [name for name, _ in _ranked(evidence, "platform")]

    if layers:
        share = layers[0][1].weight / layer_total
        strength = min(1.0, layers[0][1].weight / 2.0)
        layer_confidence = share * (0.5 + 0.5 * strength)
    else:
        layer_confidence = 0.0
    direct_topic_weight = sum(ev.weight for _, ev in _ranked(evidence, "topic"))
    topic_confidence = min(1.0, direct_topic_weight / 2.0)
    tech_confidence = min(1.0, 0.5 * (len(languages) + len(frameworks) + len(platforms)))
    confidence = 0.55 * layer_confidence + 0.35 * topic_confidence + 0.10 * tech_confidence
    if used_fuzzy:
        confidence *= 0.95
    confidence = round(max(0.0, min(1.0, confidence)), 3)

    warnings: list[str] = []
    if confidence < VERY_LOW_CONFIDENCE:
        warnings.append(
            f"VERY LOW CONFIDENCE ({confidence:.2f}): the task names almost no known layer, "
            "topic or technology; directives were chosen mostly by text similarity. "
            "Describe the task with its layer and technology for better results."
        )
    elif confidence < LOW_CONFIDENCE:
        warnings.append(
            f"low confidence ({confidence:.2f}) in the detected context; check the layer "
            "and topics, or describe the task more specifically."
        )
    if len(candidates) > 1 and candidates[0].confidence - candidates[1].confidence < 0.2:
        warnings.append(
            "ambiguous layer: "
            + ", ".join(f"{c.layer} ({c.confidence:.2f})" for c in candidates[:3])
        )
    return DetectedContext(
        detected_layer=detected_layer,
        layer_candidates=candidates,
        topics=topics,
        languages=languages,
        frameworks=frameworks,
        platforms=platforms,
        keywords=extract_keywords(tokens) if return_keywords else None,
        confidence=confidence,
        warnings=warnings,
    )


class DetectionCache:
    """A small LRU of detection results with a time-to-live (Requirement 10.4).

    Keys include the graph version, so learning new topics invalidates old results.
    """

    def __init__(self, *, ttl_s: float = 300.0, max_entries: int = 1024) -> None:
        self._ttl = ttl_s
        self._max = max_entries
        self._entries: OrderedDict[tuple[object, ...], tuple[float, DetectedContext]] = (
            OrderedDict()
        )
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[object, ...], *, now: float | None = None) -> DetectedContext | None:
        if self._ttl <= 0:
            return None
        entry = self._entries.get(key)
        moment = time.monotonic() if now is None else now
        if entry is None or moment - entry[0] > self._ttl:
            if entry is not None:
                del self._entries[key]
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[1]

    def put(
        self, key: tuple[object, ...], value: DetectedContext, *, now: float | None = None
    ) -> None:
        if self._ttl <= 0:
            return
        self._entries[key] = (time.monotonic() if now is None else now, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
