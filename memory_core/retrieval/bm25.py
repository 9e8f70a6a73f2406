"""Okapi BM25 over one scope's postings: the statistics are the scope's, not the store's.

FTS5's ``bm25()`` (and the server backends, which compute it as FTS5 does) count documents,
term frequencies and the average length over every row of the index, so the rank of one
scope's rows moves when another scope of the same store gains rows that share the query's
words. This module ranks from postings a backend read for one scope
(:meth:`~memory_core.storage.ports.LexicalIndex.term_frequencies` and
:meth:`~memory_core.storage.ports.LexicalIndex.lengths`) with FTS5's formula: k1 = 1.2,
b = 0.75, IDF ``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6, one document = text + tags,
ties by row id. Pure: the postings are values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from memory_core.models import ScoredId
from memory_core.storage.ports import LexicalQuery

__all__ = ["bm25_search", "idf"]

_K1 = 1.2
_B = 0.75


def idf(rows: int, holding: int) -> float:
    """FTS5's IDF of a term ``holding`` of ``rows`` documents hold (floored, never negative)."""
    return max(math.log((rows - holding + 0.5) / (holding + 0.5)), 1e-6)


def bm25_search(
    query: LexicalQuery,
    postings: Mapping[str, Mapping[int, int]],
    lengths: Mapping[int, int],
    *,
    limit: int,
) -> list[ScoredId]:
    """The top ``limit`` rows of ``lengths`` matching ``query``, by BM25 with the statistics
    of those rows alone: N = ``len(lengths)``, the average of ``lengths``, and a term's
    document frequency = the rows of ``lengths`` in its postings.

    Args:
        query: the terms and how they combine (AND: rows holding every term; OR: any).
        postings: per term of the query, row id -> how often the term occurs in it (a term
            missing here occurs nowhere). Rows outside ``lengths`` are ignored.
        lengths: every row of the scope -> its length in tokens.
        limit: the most rows to return.

    Returns:
        Best first (higher score is better), ties by row id.
    """
    terms = list(dict.fromkeys(t for t in query.terms if t.strip()))
    if not terms or limit <= 0 or not lengths:
        return []
    rows = len(lengths)
    avgdl = max(sum(lengths.values()) / rows, 1e-9)
    own = [{i: tf for i, tf in postings.get(t, {}).items() if i in lengths} for t in terms]
    if query.operator == "AND":
        if any(not p for p in own):
            return []
        smallest = min(own, key=len)
        matched = [i for i in smallest if all(i in p for p in own)]
    else:
        matched = list({i for p in own for i in p})
    weights = [idf(rows, len(p)) for p in own]
    scored: list[tuple[float, int]] = []
    for item_id in matched:
        norm = _K1 * (1 - _B + _B * lengths[item_id] / avgdl)
        score = 0.0
        for weight, term_postings in zip(weights, own, strict=True):
            tf = term_postings.get(item_id)
            if tf:
                score += weight * (tf * (_K1 + 1)) / (tf + norm)
        scored.append((score, item_id))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [ScoredId(item_id, score) for score, item_id in scored[:limit]]
