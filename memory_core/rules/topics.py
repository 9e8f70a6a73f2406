"""Topic names that meet: "auth", "Authentication" and "authn" are one topic node.

A topic is normalised in three steps, cheapest first: a canonical spelling (casefold, words
joined by ``-``), an alias table for the abbreviations teams actually write, then a fuzzy match
(rapidfuzz) against the topics already known in the scope, which absorbs typos and
inflections ("authenticaton", "migrations" vs "migration"). Broad parents come from the shared
vocabulary, so a directive about "passwords" also counts as "security".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Final

from rapidfuzz import fuzz, process

from rules_parser.vocabulary import TOPIC_KEYWORDS

__all__ = [
    "TOPIC_ALIASES",
    "TopicNormalizer",
    "canonical_topic",
    "expand_topics",
    "stem",
    "topic_parents",
]

# Abbreviations and synonyms → one canonical name. Keys are canonical spellings.
TOPIC_ALIASES: Final = MappingProxyType(
    {
        "auth": "authentication",
        "authn": "authentication",
        "authenticate": "authentication",
        "login": "authentication",
        "sign-in": "authentication",
        "signin": "authentication",
        "authz": "authorization",
        "authorisation": "authorization",
        "access-control": "authorization",
        "permissions": "authorization",
        "rbac": "authorization",
        "db": "database",
        "databases": "database",
        "sql": "database",
        "tests": "testing",
        "test": "testing",
        "unit-tests": "testing",
        "docs": "documentation",
        "doc": "documentation",
        "perf": "performance",
        "ci": "ci-cd",
        "cicd": "ci-cd",
        "ci/cd": "ci-cd",
        "k8s": "kubernetes",
        "errors": "error-handling",
        "exceptions": "error-handling",
        "error": "error-handling",
        "logs": "logging",
        "observability": "logging",
        "ui": "frontend",
        "front-end": "frontend",
        "secret": "secrets",
        "credentials": "secrets",
        "apis": "api",
        "rest-api": "api",
        "i18n": "internationalization",
        "a11y": "accessibility",
        "validate": "validation",
        "input-validation": "validation",
        "migration": "migrations",
        "deploy": "deployment",
        "deployments": "deployment",
        "style-guide": "style",
        "code-style": "style",
        "formatting": "style",
        "vcs": "git",
    }
)

_SEPARATORS = re.compile(r"[\s_]+")
_STRIP = re.compile(r"[^\w#+./-]+")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "es", "ed", "s")


def stem(word: str) -> str:
    """A crude, fast English stem: enough to make "migrations" meet "migration"."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            base = word[: -len(suffix)]
            return base + "y" if suffix == "ies" else base
    return word


@lru_cache(maxsize=8192)
def canonical_topic(name: str) -> str:
    """Casefold, join words with ``-``, strip punctuation, apply the alias table.

    Returns an empty string for names with no word characters.
    """
    text = _SEPARATORS.sub("-", name.strip().casefold())
    text = _STRIP.sub("", text).strip("-./")
    return TOPIC_ALIASES.get(text, text)


def _build_parents() -> dict[str, frozenset[str]]:
    parents: dict[str, set[str]] = {}
    for broad, keywords in TOPIC_KEYWORDS.items():
        for keyword in (broad, *keywords):
            parents.setdefault(canonical_topic(keyword), set()).add(broad)
    return {k: frozenset(v) for k, v in parents.items()}


_PARENTS: Final = _build_parents()


def topic_parents(topic: str) -> frozenset[str]:
    """The broad vocabulary topics a (canonical) topic belongs to, itself excluded."""
    return _PARENTS.get(topic, frozenset()) - {topic}


class TopicNormalizer:
    """Normalises topic names against the topics already known in one scope.

    Args:
        known: canonical topic names already in the graph (and the vocabulary's broad topics).
        cutoff: rapidfuzz ``ratio`` (0..100) above which a new name is taken to be a known one.
    """

    def __init__(self, known: Iterable[str] = (), *, cutoff: float = 88.0) -> None:
        self._known: dict[str, None] = dict.fromkeys(TOPIC_KEYWORDS)
        self._known.update(dict.fromkeys(canonical_topic(k) for k in known))
        self._stems: dict[str, str] = {stem(k): k for k in self._known}
        self._cutoff = cutoff

    @property
    def known(self) -> list[str]:
        return list(self._known)

    def normalize(self, name: str) -> str:
        """The canonical topic ``name`` stands for; learns it when it is new.

        Returns:
            The canonical name, or ``""`` when ``name`` has no word characters.
        """
        topic = canonical_topic(name)
        if not topic or topic in self._known:
            return topic
        by_stem = self._stems.get(stem(topic))
        if by_stem is not None:
            return by_stem
        # Short names are too easy to confuse by edit distance ("api" vs "ui").
        if len(topic) >= 5:
            match = process.extractOne(
                topic, list(self._known), scorer=fuzz.ratio, score_cutoff=self._cutoff
            )
            if match is not None:
                return str(match[0])
        self._known[topic] = None
        self._stems.setdefault(stem(topic), topic)
        return topic

    def normalize_all(self, names: Iterable[str]) -> tuple[str, ...]:
        """Normalise many names, dropping empties and duplicates, keeping first-seen order."""
        out: dict[str, None] = {}
        for name in names:
            topic = self.normalize(name)
            if topic:
                out[topic] = None
        return tuple(out)


def expand_topics(
    topics: Iterable[str], parents: Mapping[str, frozenset[str]] | None = None
) -> frozenset[str]:
    """Topics plus their broad parents (used for overlap and authority matching)."""
    out: set[str] = set()
    for topic in topics:
        out.add(topic)
        out |= (parents or _PARENTS).get(topic, frozenset())
    return frozenset(out)
