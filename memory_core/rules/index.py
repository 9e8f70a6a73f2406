"""The in-memory view of one scope's rules graph that the ranker reads.

Loading every directive's metadata once per graph version makes graph expansion and scoring
dictionary work instead of per-candidate queries. The index is rebuilt when the scope's graph
version (bumped by every write, in any process) changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_core.retrieval.bm25 import ScopeLexicon
from memory_core.rules.detection import STOPWORDS
from memory_core.rules.dictionaries import Dictionaries, tokenize
from memory_core.rules.persistence import DirectiveRow, RuleRow
from memory_core.rules.scoring import condition_terms
from memory_core.rules.topics import expand_topics, stem
from rules_parser.noise import restatement_key

__all__ = ["DirectiveIndex", "IndexedDirective", "IndexedRule", "build_index"]


@dataclass(frozen=True, slots=True)
class IndexedRule:
    rule_id: str
    name: str
    title: str | None
    layer: str | None
    authoritative_for: frozenset[str]
    topics: tuple[str, ...]
    conditions: tuple[str, ...]
    condition_terms: tuple[tuple[tuple[str, float], ...], ...]
    sources: tuple[str, ...]
    related: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IndexedDirective:
    item_id: int
    uid: str
    rule_id: str
    statement: str
    severity: str
    polarity: str
    layer: str
    topics: tuple[str, ...]
    topic_set: frozenset[str]  # with broad parents
    conditions: tuple[str, ...]  # directive-level, then rule-level
    condition_terms: tuple[tuple[tuple[str, float], ...], ...]
    # The strong (non-generic) stems of all its conditions: a task sharing none of them
    # meets none, and most candidates of a query are ruled out by one set test.
    condition_strong: frozenset[str]
    token_count: int
    uri: str
    line_start: int | None
    line_end: int | None
    section: tuple[str, ...]


@dataclass
class DirectiveIndex:
    """Directives and rules of one scope at one graph version."""

    version: int
    directives: dict[int, IndexedDirective] = field(default_factory=dict)
    rules: dict[str, IndexedRule] = field(default_factory=dict)
    by_rule: dict[str, list[int]] = field(default_factory=dict)
    by_topic: dict[str, list[int]] = field(default_factory=dict)
    wildcard: list[int] = field(default_factory=list)
    rules_by_authority: dict[str, list[str]] = field(default_factory=dict)
    rules_by_condition_stem: dict[str, set[str]] = field(default_factory=dict)
    # Rule-level When-to-Apply conditions as postings, so matching a task touches only the
    # conditions sharing one of its strong words: strong stem -> [(rule id, condition #)],
    # and per condition its total weight and its weak (generic-verb) terms.
    condition_postings: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    condition_total: dict[tuple[str, int], float] = field(default_factory=dict)
    condition_weak: dict[tuple[str, int], tuple[tuple[str, float], ...]] = field(
        default_factory=dict
    )
    dictionaries: Dictionaries | None = None
    # Stored embeddings, row i belongs to vector_ids[i] (None: no vectors, or too many).
    vector_ids: np.ndarray | None = None
    vectors: np.ndarray | None = None
    vector_row: dict[int, int] = field(default_factory=dict)
    # The lexical arm's BM25 statistics, this scope's only: its directives' lengths (read at
    # the first query) and the postings of each query term, learnt as queries come.
    lexicon: ScopeLexicon | None = None
    # Each directive's restatement key (rules_parser.noise), computed the first time a query
    # ranks it: a pure function of the statement, which this index version fixes.
    restatement_keys: dict[int, frozenset[str]] = field(default_factory=dict)
    statement_stems: dict[int, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # The candidate loop's per-directive columns (``signal_columns.DirectiveColumns``), built
    # by the first query of this version.
    columns: Any = None

    def restatement_key(self, item_id: int) -> frozenset[str]:
        """The content words of a directive's statement (see ``rules_parser.noise``)."""
        key = self.restatement_keys.get(item_id)
        if key is None:
            key = self.restatement_keys[item_id] = restatement_key(
                self.directives[item_id].statement
            )
        return key

    def statement_words(self, item_id: int) -> tuple[tuple[str, str], ...]:
        """(word, stem) of each distinct word of a directive's statement that can explain it
        (no stopword, longer than two characters), in statement order; kept like the keys."""
        words = self.statement_stems.get(item_id)
        if words is None:
            words = self.statement_stems[item_id] = tuple(
                (w, stem(w))
                for w in dict.fromkeys(tokenize(self.directives[item_id].statement))
                if w not in STOPWORDS and len(w) > 2
            )
        return words

    def attach_vectors(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        """Keep the directives' embeddings in memory for exact in-process KNN."""
        self.vector_ids = ids
        self.vectors = matrix
        self.vector_row = {int(item_id): row for row, item_id in enumerate(ids.tolist())}

    @property
    def size(self) -> int:
        return len(self.directives)


def build_index(
    version: int, rows: Sequence[DirectiveRow], rules: Sequence[RuleRow]
) -> DirectiveIndex:
    """Build the index from stored rows (pure)."""
    index = DirectiveIndex(version=version)
    for rule in rules:
        meta = rule.metadata
        conditions = tuple(meta.get("when_to_apply") or ())
        index.rules[rule.rule_id] = IndexedRule(
            rule_id=rule.rule_id,
            name=str(meta.get("rule_name") or rule.name),
            title=meta.get("title"),
            layer=meta.get("layer"),
            authoritative_for=frozenset(meta.get("authoritative_for") or ()),
            topics=tuple(meta.get("topics") or ()),
            conditions=conditions,
            condition_terms=tuple(condition_terms(c) for c in conditions),
            sources=tuple(meta.get("sources") or ()),
            related=tuple(meta.get("related_rules") or ()),
        )
        for topic in meta.get("authoritative_for") or ():
            index.rules_by_authority.setdefault(topic, []).append(rule.rule_id)
        for number, rule_terms in enumerate(index.rules[rule.rule_id].condition_terms):
            key = (rule.rule_id, number)
            index.condition_total[key] = sum(w for _, w in rule_terms)
            index.condition_weak[key] = tuple((s, w) for s, w in rule_terms if w != 1.0)
            for stem_, weight in rule_terms:
                if weight == 1.0:  # generic verbs never qualify a condition on their own
                    index.rules_by_condition_stem.setdefault(stem_, set()).add(rule.rule_id)
                    index.condition_postings.setdefault(stem_, []).append(key)
    terms_cache: dict[str, tuple[tuple[str, float], ...]] = {}
    expanded: dict[tuple[str, ...], frozenset[str]] = {}
    for row in rows:
        meta = row.metadata
        rule_id = str(meta.get("rule_id", ""))
        owner = index.rules.get(rule_id)
        own = tuple(meta.get("when_to_apply") or ())
        conditions = own + (owner.conditions if owner else ())
        terms: list[tuple[tuple[str, float], ...]] = []
        for condition in own:
            if condition not in terms_cache:
                terms_cache[condition] = condition_terms(condition)
            terms.append(terms_cache[condition])
        all_terms = tuple(terms) + (owner.condition_terms if owner else ())
        topics = tuple(meta.get("topics") or ())
        # Directives of a rule mostly share their topic list: expand each distinct list once.
        topic_set = expanded.get(topics)
        if topic_set is None:
            topic_set = expanded[topics] = expand_topics(topics)
        directive = IndexedDirective(
            item_id=row.item_id,
            uid=row.uid,
            rule_id=rule_id,
            statement=str(meta.get("statement", "")),
            severity=str(meta.get("severity", "SHOULD")),
            polarity=str(meta.get("polarity", "do")),
            layer=str(meta.get("layer") or ""),
            topics=topics,
            topic_set=topic_set,
            conditions=conditions,
            condition_terms=all_terms,
            condition_strong=frozenset(s for terms in all_terms for s, w in terms if w == 1.0),
            token_count=row.token_count,
            uri=row.uri,
            line_start=row.start_line,
            line_end=row.end_line,
            section=tuple(meta.get("section_path") or ()),
        )
        index.directives[row.item_id] = directive
        index.by_rule.setdefault(rule_id, []).append(row.item_id)
        for topic in directive.topic_set:
            index.by_topic.setdefault(topic, []).append(row.item_id)
        if directive.layer == "*":
            index.wildcard.append(row.item_id)
    return index
