"""Okapi BM25 over one scope's postings: the statistics are the scope's, not the store's.

FTS5's ``bm25()`` (and the server backends, which compute it as FTS5 does) count documents,
term frequencies and the average length over every row of the index, so the rank of one
scope's rows moves when another scope of the same store gains rows that share the query's
words. This module ranks from postings a backend read for one scope
(:meth:`~memory_core.storage.ports.LexicalIndex.term_frequencies` and
:meth:`~memory_core.storage.ports.LexicalIndex.lengths`) with FTS5's formula: k1 = 1.2,
b = 0.75, IDF ``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6, one document = text + tags,
ties by row id. Pure: the postings are values. A :class:`ScopeLexicon` keeps them as arrays
(scoring a query is a few vector operations per term, not a Python loop per row).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from memory_core.models import ScoredId
from memory_core.storage.ports import LexicalQuery

__all__ = ["ScopeLexicon", "bm25_search", "idf"]

_K1 = 1.2
_B = 0.75
_EMPTY = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))


def idf(rows: int, holding: int) -> float:
    """FTS5's IDF of a term ``holding`` of ``rows`` documents hold (floored, never negative)."""
    return max(math.log((rows - holding + 0.5) / (holding + 0.5)), 1e-6)


class ScopeLexicon:
    """One scope's rows (their lengths) and the postings of the terms added so far."""

    def __init__(self, lengths: Mapping[int, int]) -> None:
        """Args:
        lengths: every row of the scope -> its length in tokens.
        """
        self.ids = np.array(sorted(lengths), dtype=np.int64)
        self._row = {int(item_id): row for row, item_id in enumerate(self.ids.tolist())}
        size = np.array([lengths[i] for i in self.ids.tolist()], dtype=np.float64)
        avgdl = max(float(size.sum()) / len(size), 1e-9) if len(size) else 1.0
        self._norm = _K1 * (1 - _B + _B * size / avgdl)
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.entries = 0

    def __contains__(self, term: str) -> bool:
        return term in self._postings

    def rows(self, term: str) -> int:
        """Rows of the scope holding ``term`` (0 for a term not added)."""
        return len(self._postings.get(term, _EMPTY)[0])

    def add(self, term: str, frequencies: Mapping[int, int]) -> None:
        """Record a term's postings (row id -> frequency); rows outside the scope are ignored."""
        pairs = sorted((self._row[i], tf) for i, tf in frequencies.items() if i in self._row)
        rows = np.array([r for r, _ in pairs], dtype=np.int64)
        tfs = np.array([tf for _, tf in pairs], dtype=np.float64)
        self._postings[term] = (rows, tfs)
        self.entries += len(pairs) + 1

    def clear(self) -> None:
        """Forget every term's postings (the lengths stay)."""
        self._postings.clear()
        self.entries = 0

    def search(self, query: LexicalQuery, *, limit: int) -> list[ScoredId]:
        """The top ``limit`` rows matching ``query`` by BM25 with this scope's statistics:
        N = the scope's rows, their average length, a term's rows among them. A term not
        added occurs nowhere. Best first (higher is better), ties by row id."""
        terms = list(dict.fromkeys(t for t in query.terms if t.strip()))
        size = len(self.ids)
        if not terms or limit <= 0 or not size:
            return []
        own = [self._postings.get(t, _EMPTY) for t in terms]
        if query.operator == "AND" and any(not len(rows) for rows, _ in own):
            return []
        scores = np.zeros(size, dtype=np.float64)
        hits = np.zeros(size, dtype=np.int32)
        for rows, tfs in own:
            # Summed term by term in query order, as FTS5 sums its phrases.
            weight = idf(size, len(rows))
            scores[rows] += weight * (tfs * (_K1 + 1)) / (tfs + self._norm[rows])
            hits[rows] += 1
        matched = np.flatnonzero(hits == len(own) if query.operator == "AND" else hits > 0)
        if not len(matched):
            return []
        # Rows are in id order, so a stable sort on the score breaks ties by id.
        order = matched[np.argsort(-scores[matched], kind="stable")][:limit]
        return [ScoredId(int(self.ids[r]), float(scores[r])) for r in order.tolist()]


def bm25_search(
    query: LexicalQuery,
    postings: Mapping[str, Mapping[int, int]],
    lengths: Mapping[int, int],
    *,
    limit: int,
) -> list[ScoredId]:
    """The top ``limit`` rows of ``lengths`` matching ``query``, by BM25 with the statistics
    of those rows alone (:meth:`ScopeLexicon.search` over ``postings``).

    Args:
        query: the terms and how they combine (AND: rows holding every term; OR: any).
        postings: per term of the query, row id -> how often the term occurs in it (a term
            missing here occurs nowhere). Rows outside ``lengths`` are ignored.
        lengths: every row of the scope -> its length in tokens.
        limit: the most rows to return.

    Returns:
        Best first (higher score is better), ties by row id.
    """
    lexicon = ScopeLexicon(lengths)
    for term in query.terms:
        if term in postings:
            lexicon.add(term, postings[term])
    return lexicon.search(query, limit=limit)
