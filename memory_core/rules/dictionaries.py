"""Detection dictionaries as data: built-in vocabulary + ``memoir.toml`` extras + learned terms.

The built-in keywords come from ``rules_parser.vocabulary`` (shared with the parser). Teams
extend them in ``[rules]`` (``extra_topics``, ``extra_technologies``, ``extra_layer_keywords``)
and the graph teaches them more: every topic and technology the ingested rules name becomes a
keyword for itself. :class:`Dictionaries` compiles all of it into lookup tables once per scope
and graph version, so detecting a task is a few dictionary probes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from memory_core.config import RulesSettings
from memory_core.rules.topics import TOPIC_ALIASES, canonical_topic, stem
from rules_parser.vocabulary import (
    FRAMEWORK_KEYWORDS,
    LANGUAGE_KEYWORDS,
    LAYER_KEYWORDS,
    PLATFORM_KEYWORDS,
    TOPIC_KEYWORDS,
)

__all__ = ["Category", "Dictionaries", "Hit", "build_dictionaries", "tokenize"]

Category = Literal["layer", "topic", "language", "framework", "platform"]

# Words with dots, hashes and slashes inside stay whole: ".net", "c#", "node.js", "ci/cd".
_TOKEN = re.compile(r"\.?[a-z0-9][a-z0-9#+]*(?:[./\-][a-z0-9#+]+)*#?")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens of ``text``, keeping technology spellings whole."""
    return _TOKEN.findall(text.casefold())


@dataclass(frozen=True, slots=True)
class Hit:
    """A dictionary entry a keyword points to."""

    category: Category
    name: str


@dataclass
class Dictionaries:
    """Compiled keyword tables for one scope.

    Attributes:
        single: stemmed single-word keyword -> entries.
        phrases: tuple of stemmed words (2..4) -> entries.
        fuzzy_pool: single-word keywords (5+ letters) for typo-tolerant matching.
        learned_topics: topics learned from the graph (canonical names).
    """

    single: dict[str, list[Hit]] = field(default_factory=dict)
    phrases: dict[tuple[str, ...], list[Hit]] = field(default_factory=dict)
    fuzzy_pool: dict[str, str] = field(default_factory=dict)
    learned_topics: frozenset[str] = frozenset()
    max_phrase: int = 1
    _memo: dict[str, tuple[list[Hit], bool]] = field(default_factory=dict, repr=False)

    def add(self, category: Category, name: str, keyword: str) -> None:
        words = tokenize(keyword.replace("-", " ")) if " " in keyword else tokenize(keyword)
        if not words:
            return
        hit = Hit(category, name)
        if len(words) == 1:
            key = stem(words[0])
            bucket = self.single.setdefault(key, [])
            if hit not in bucket:
                bucket.append(hit)
            if len(words[0]) >= 5 and words[0].isalpha():
                self.fuzzy_pool.setdefault(words[0], key)
            # "api-contracts" is also written "api contracts".
            if "-" in words[0]:
                self.add(category, name, words[0].replace("-", " "))
            return
        phrase = tuple(stem(w) for w in words[:4])
        bucket = self.phrases.setdefault(phrase, [])
        if hit not in bucket:
            bucket.append(hit)
        self.max_phrase = max(self.max_phrase, len(phrase))

    def lookup(self, token: str) -> tuple[list[Hit], bool]:
        """Entries for one token: exact or stemmed match, else a fuzzy one (typos).

        Returns:
            (entries, fuzzy) where ``fuzzy`` says the match tolerated a typo.
        """
        cached = self._memo.get(token)
        if cached is not None:
            return cached
        hits = self.single.get(token) or self.single.get(stem(token))
        result: tuple[list[Hit], bool]
        if hits:
            result = (hits, False)
        elif len(token) >= 5 and token.isalpha():
            result = (self._fuzzy(token), True)
        else:
            result = ([], False)
        if len(self._memo) < 50_000:
            self._memo[token] = result
        return result

    def _fuzzy(self, token: str) -> list[Hit]:
        from rapidfuzz import fuzz, process

        match = process.extractOne(
            token, self.fuzzy_pool.keys(), scorer=fuzz.ratio, score_cutoff=86
        )
        if match is None:
            return []
        return self.single.get(self.fuzzy_pool[match[0]], [])


def _add_vocabulary(
    dictionaries: Dictionaries, category: Category, vocabulary: Mapping[str, Iterable[str]]
) -> None:
    for name, keywords in vocabulary.items():
        if category != "layer":
            dictionaries.add(category, name, name)
        for keyword in keywords:
            dictionaries.add(category, name, keyword)


def build_dictionaries(
    settings: RulesSettings,
    *,
    learned_topics: Iterable[str] = (),
    learned_technologies: Mapping[str, str] | None = None,
) -> Dictionaries:
    """Compile the detection tables.

    Args:
        settings: the ``[rules]`` settings (extra topics, technologies, layer keywords).
        learned_topics: canonical topic names present in the graph.
        learned_technologies: technology name -> category (language/framework/platform) from
            the graph.

    Returns:
        The compiled :class:`Dictionaries`.
    """
    tables = Dictionaries()
    _add_vocabulary(tables, "layer", LAYER_KEYWORDS)
    _add_vocabulary(tables, "topic", TOPIC_KEYWORDS)
    _add_vocabulary(tables, "language", LANGUAGE_KEYWORDS)
    _add_vocabulary(tables, "framework", FRAMEWORK_KEYWORDS)
    _add_vocabulary(tables, "platform", PLATFORM_KEYWORDS)
    for alias, canonical in TOPIC_ALIASES.items():
        tables.add("topic", canonical, alias)
        tables.add("topic", canonical, canonical)
    learned = set()
    for topic in learned_topics:
        name = canonical_topic(topic)
        if name:
            learned.add(name)
            tables.add("topic", name, name)
    for layer, keywords in settings.extra_layer_keywords.items():
        for keyword in keywords:
            tables.add("layer", layer, keyword)
    for topic, keywords in settings.extra_topics.items():
        name = canonical_topic(topic)
        learned.add(name)
        tables.add("topic", name, name)
        for keyword in keywords:
            tables.add("topic", name, keyword)
    for tech, keywords in settings.extra_technologies.items():
        category = _technology_category(tech)
        tables.add(category, tech.casefold(), tech)
        for keyword in keywords:
            tables.add(category, tech.casefold(), keyword)
    for tech, learned_category in (learned_technologies or {}).items():
        if learned_category == "language":
            tables.add("language", tech, tech)
        elif learned_category == "platform":
            tables.add("platform", tech, tech)
        elif learned_category == "framework":
            tables.add("framework", tech, tech)
    tables.learned_topics = frozenset(learned)
    return tables


def _technology_category(name: str) -> Category:
    key = name.casefold()
    if key in LANGUAGE_KEYWORDS:
        return "language"
    if key in PLATFORM_KEYWORDS:
        return "platform"
    return "framework"
