"""Lexical query rewriting: natural-language text into FTS5 MATCH expressions.

Agents and people type sentences ("how do we handle retries?"); bm25 over every word of a
sentence is dominated by stopwords and an OR of ten terms matches half the corpus. We drop
stopwords (unless nothing else is left), cap the number of terms, and produce an AND query
to try first and an OR query to fall back to when AND finds too little.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_core.retrieval.fts import fts_terms, quote_term

__all__ = ["STOPWORDS", "LexicalQuery", "rewrite_query", "sanitised_literal"]

# A short English list: the words that carry no topic in questions and instructions.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)


@dataclass(frozen=True, slots=True)
class LexicalQuery:
    """The rewritten forms of one query text."""

    terms: tuple[str, ...]
    """The kept terms, lowercased, in first-seen order."""
    dropped: tuple[str, ...]
    """Stopwords (and terms past the cap) that were dropped."""

    @property
    def and_match(self) -> str | None:
        """Every term required (None when there are no terms)."""
        return " AND ".join(quote_term(t) for t in self.terms) if self.terms else None

    @property
    def or_match(self) -> str | None:
        """Any term (None when there are no terms)."""
        return " OR ".join(quote_term(t) for t in self.terms) if self.terms else None


def rewrite_query(text: str, *, max_terms: int = 12) -> LexicalQuery:
    """Terms of ``text`` with stopwords dropped and at most ``max_terms`` kept.

    If every term is a stopword, they are all kept ("to be or not to be" still searches).
    """
    words = fts_terms(text, max_terms=256)
    kept = [w for w in words if w not in STOPWORDS]
    if not kept:
        kept = words
    dropped = [w for w in words if w not in kept] + kept[max_terms:]
    return LexicalQuery(tuple(kept[:max_terms]), tuple(dropped))


def sanitised_literal(text: str) -> str:
    """The spec's retry form: every non-word character replaced by a space."""
    return " ".join("".join(c if (c.isalnum() or c == "_") else " " for c in text).split())
