"""Candidate directives for a task: graph expansion, the lexical arm and the semantic arm.

Graph expansion needs no text match (rules authoritative for a detected topic, rules whose
When to Apply matches, wildcard directives on a detected topic). The lexical (FTS5, AND first
then a bounded OR) and semantic (sqlite-vec KNN) arms run in one read, which also computes
SemanticSim for every other candidate from its stored vector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memory_core.errors import EmbeddingError
from memory_core.retrieval.fts import fts_terms, quote_term
from memory_core.rules.detection import STOPWORDS
from memory_core.rules.dictionaries import tokenize
from memory_core.rules.graph import DIRECTIVE_KIND
from memory_core.rules.index import DirectiveIndex
from memory_core.rules.scoring import QueryFeatures, when_to_apply_match
from memory_core.storage.sqlite import items as item_sql
from memory_core.storage.sqlite import rules as rules_sql

__all__ = [
    "SEMANTIC_LOADING",
    "graph_candidates",
    "lexical_queries",
    "query_vector",
    "search_arms",
]

SEMANTIC_LOADING = "semantic ranking unavailable: embedding model loading"
# The OR pass computes a bm25 for every row holding any of its words: with common words at
# 100k directives that is most of the table (100+ ms). Words join it rarest first while the
# rows they cover stay within this many (a few ms of ranking).
_OR_MAX_ROWS = 20_000
# Distinct query terms whose row counts an index remembers (cleared when exceeded).
_TERM_CACHE_MAX = 50_000


def lexical_queries(terms: Sequence[str], rows: Mapping[str, int], *, max_rows: int) -> list[str]:
    """The MATCH expressions of the lexical arm, in the order to run them (pure).

    Terms no row holds are left out (one of them would empty the AND, and they add nothing
    to an OR). Then: AND over the remaining terms, which is precise and cheap because FTS5
    ranks only the rows holding every term; then OR over the rarest terms, added while the
    rows they cover stay within ``max_rows``. A term more common than that alone is left to
    the AND pass and the semantic and graph arms.

    Args:
        terms: the task's FTS terms (stopwords removed), in task order.
        rows: FTS rows holding each term.
        max_rows: the most rows the OR pass may rank.
    """
    present = sorted((t for t in dict.fromkeys(terms) if rows.get(t, 0) > 0), key=lambda t: rows[t])
    queries: list[str] = []
    if len(present) > 1:
        queries.append(" AND ".join(quote_term(t) for t in present))
    chosen: list[str] = []
    covered = 0
    for term in present:  # rarest first
        if covered + rows[term] > max_rows:
            break
        chosen.append(term)
        covered += rows[term]
    if chosen:
        queries.append(" OR ".join(quote_term(t) for t in chosen))
    return queries


def graph_candidates(
    index: DirectiveIndex, topics: frozenset[str], features: QueryFeatures, *, limit: int
) -> set[int]:
    """Graph expansion (no text match needed): directives of rules authoritative for a
    detected topic or whose When to Apply matches the task, and wildcard-layer directives
    on a detected topic. Capped at ``rules.graph_limit``, strongest rules first, so a
    broad topic cannot pull thousands of candidates into scoring."""
    priority: dict[str, float] = {}
    for topic in topics:
        for rule_id in index.rules_by_authority.get(topic, ()):
            priority[rule_id] = priority.get(rule_id, 0.0) + 1.0
    checked: set[str] = set()
    for stem_ in features.task_stems:
        for rule_id in index.rules_by_condition_stem.get(stem_, ()):
            if rule_id in checked:
                continue
            checked.add(rule_id)
            score, _ = when_to_apply_match(
                index.rules[rule_id].condition_terms, features.task_stems
            )
            if score >= 0.5:
                priority[rule_id] = priority.get(rule_id, 0.0) + score
    found: dict[int, None] = {}
    for rule_id in sorted(priority, key=lambda r: (-priority[r], r)):
        members = index.by_rule.get(rule_id, ())
        if len(found) + len(members) > limit:
            break
        found.update(dict.fromkeys(members))
    for topic in sorted(topics):
        for item_id in index.by_topic.get(topic, ()):
            if len(found) >= limit:
                return set(found)
            if index.directives[item_id].layer == "*":
                found[item_id] = None
    return set(found)


async def query_vector(
    embedder: Any, text: str, warnings: list[str]
) -> tuple[np.ndarray | None, bool]:
    """The task's embedding, or (None, False) with a warning when the model is not usable."""
    if not embedder.is_ready():
        # Never block a query on the model: rank without SemanticSim this time.
        embedder.start_loading()
        warnings.append(SEMANTIC_LOADING)
        return None, False
    try:
        return await embedder.embed_query(text), True
    except EmbeddingError as exc:
        warnings.append(f"semantic ranking unavailable: {exc.message}; keyword matching used")
        return None, False


def _in_memory_semantic(
    index: DirectiveIndex, query_vec: np.ndarray, k: int
) -> tuple[list[int], np.ndarray] | None:
    """Exact KNN over the index's vectors: (nearest ids, similarity of every row)."""
    ids = index.vector_ids
    if index.vectors is None or ids is None:
        return None
    if index.vectors.shape[1] != query_vec.shape[0]:
        return None  # another embedder wrote these vectors: use the store's own search
    sims = index.vectors @ query_vec.astype(np.float32, copy=False)
    top = min(k, len(sims))
    best = np.argpartition(-sims, top - 1)[:top]
    # Ties broken by id so results are stable across runs.
    ordered = sorted(best.tolist(), key=lambda row: (-float(sims[row]), int(ids[row])))
    return [int(ids[row]) for row in ordered], sims


async def search_arms(
    db: Any,
    index: DirectiveIndex,
    text: str,
    scope: str,
    query_vec: np.ndarray | None,
    graph_ids: set[int],
    *,
    k: int,
) -> tuple[list[int], list[int], dict[int, float]]:
    """Lexical and semantic arms: (lexical ids, nearest ids, similarities).

    Similarities cover the nearest neighbours and the lexical and graph candidates too, so
    every candidate gets a SemanticSim. With the index's vectors in memory the semantic arm
    is one matrix product; otherwise it is a sqlite-vec KNN plus a fetch of stored vectors,
    in the same read as the lexical arm.
    """
    in_memory = _in_memory_semantic(index, query_vec, k) if query_vec is not None else None
    words = list(dict.fromkeys(t for t in tokenize(text) if t not in STOPWORDS and len(t) > 1))
    # The FTS terms of those words ("property-based" is two), as build_match quotes them.
    terms = fts_terms(" ".join(words))
    term_rows = index.term_rows

    def run(conn: Any) -> tuple[list[int], list[int], dict[int, float]]:
        unknown = [t for t in terms if t not in term_rows]
        if unknown:
            counts = rules_sql.match_row_counts(conn, [quote_term(t) for t in unknown])
            if len(term_rows) > _TERM_CACHE_MAX:
                term_rows.clear()
            term_rows.update(zip(unknown, counts, strict=True))
        lexical: list[int] = []
        # AND first (precise and cheap), then OR to fill up (DESIGN §7).
        for match in lexical_queries(terms, term_rows, max_rows=_OR_MAX_ROWS):
            if len(lexical) >= k // 2:
                break
            hits = rules_sql.directive_lexical_hits(conn, match, scope=scope, limit=k)
            lexical += [item_id for item_id, _ in hits if item_id not in lexical]
        lexical = lexical[:k]
        similarity: dict[int, float] = {}
        nearest: list[int] = []
        if in_memory is not None:
            nearest, sims = in_memory
            for item_id in {*nearest, *lexical, *graph_ids}:
                row = index.vector_row.get(item_id)
                if row is not None:
                    similarity[item_id] = float(sims[row])
        elif query_vec is not None:
            for hit in item_sql.vector_search(
                conn, query_vec, scope=scope, kinds=[DIRECTIVE_KIND], k=k
            ):
                similarity[hit.item_id] = 1.0 - hit.score
                nearest.append(hit.item_id)
            missing = [i for i in set(lexical) | graph_ids if i not in similarity]
            stored = rules_sql.fetch_vectors(conn, missing)
            if stored:
                ids = list(stored)
                matrix = np.vstack([stored[i] for i in ids])
                for item_id, value in zip(ids, matrix @ query_vec, strict=True):
                    similarity[item_id] = float(value)
        return lexical, nearest, similarity

    return await db.read(run)
