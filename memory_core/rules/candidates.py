"""Candidate directives for a task: graph expansion, the lexical arm and the semantic arm.

Graph expansion needs no text match (rules authoritative for a detected topic, rules whose
When to Apply matches, wildcard directives on a detected topic). The lexical arm is BM25 with
the scope's own statistics (its directives' count and lengths, a term's rows among them), from
postings the index reads once per term and graph version: an AND over the task's terms that
occur in the scope, then an OR over its rarest terms, sized by how many rows each term holds.
The backend's own ranking (FTS5's bm25()) counts every scope of the store, so one project's
answer would move when another adds rules. The semantic arm is one matrix product with the
index's in-memory vectors (the store's vector search when they are not in memory). The
lexical statements run in the reader's thread while this one embeds, multiplies and expands
the graph."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np

from memory_core.errors import EmbeddingError
from memory_core.retrieval.bm25 import ScopeLexicon
from memory_core.retrieval.fts import fts_terms
from memory_core.rules.detection import STOPWORDS
from memory_core.rules.dictionaries import tokenize
from memory_core.rules.graph import DIRECTIVE_KIND
from memory_core.rules.index import DirectiveIndex
from memory_core.rules.scoring import QueryFeatures
from memory_core.scope import Scope
from memory_core.storage.ports import LexicalQuery, Store, Tx

__all__ = [
    "SEMANTIC_LOADING",
    "Arms",
    "graph_candidates",
    "lexical_queries",
    "query_vector",
    "search_arms",
]

SEMANTIC_LOADING = "semantic ranking unavailable: embedding model loading"
# The OR pass scores every row of the scope holding any of its words: with common words at
# 100k directives that is most of the scope. Words join it rarest first while the rows they
# cover stay within this many.
_OR_MAX_ROWS = 20_000
# Postings (row, frequency) an index remembers for the query terms it has seen (cleared when
# exceeded): about 100 MB of dictionaries at the limit.
_POSTINGS_CACHE_MAX = 1_000_000


def lexical_queries(
    terms: Sequence[str], rows: Mapping[str, int], *, max_rows: int
) -> list[LexicalQuery]:
    """The lexical arm's queries, in the order to run them (pure).

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
    queries: list[LexicalQuery] = []
    if len(present) > 1:
        queries.append(LexicalQuery(tuple(present), "AND"))
    chosen: list[str] = []
    covered = 0
    for term in present:  # rarest first
        if covered + rows[term] > max_rows:
            break
        chosen.append(term)
        covered += rows[term]
    if chosen:
        queries.append(LexicalQuery(tuple(chosen), "OR"))
    return queries


def rule_condition_scores(index: DirectiveIndex, task: frozenset[str]) -> dict[str, float]:
    """:func:`~memory_core.rules.scoring.when_to_apply_match` of every rule whose conditions
    share a strong word with the task (the others score 0), through the index's postings.

    The same scores as matching each such rule's conditions one by one, at the cost of one
    dictionary update per (task word, condition holding it): at 5,000 rules whose
    conditions share common words that is ten times less Python work.
    """
    hits: dict[tuple[str, int], float] = {}
    for stem_ in task:
        for key in index.condition_postings.get(stem_, ()):
            hits[key] = hits.get(key, 0.0) + 1.0
    best: dict[str, float] = {}
    for key, hit in hits.items():
        total = index.condition_total[key]
        hit += sum(w for s, w in index.condition_weak[key] if s in task)
        score = hit / total
        rule_id = key[0]
        if score > best.get(rule_id, 0.0):
            best[rule_id] = score
    return {rule_id: round(score, 4) for rule_id, score in best.items()}


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
    for rule_id, score in rule_condition_scores(index, features.task_stems).items():
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
    embedder: Any, text: str, warnings: list[str], *, wait_s: float = 0.0
) -> tuple[np.ndarray | None, bool]:
    """The task's embedding, or (None, False) with a warning when the model is not usable.

    A model still loading is waited for, up to ``wait_s`` seconds (the first call of a
    session should rank as well as the hundredth); past that the query ranks without it.
    """
    if not embedder.is_ready():
        embedder.start_loading()
        if wait_s > 0:
            with anyio.move_on_after(wait_s):
                try:
                    await embedder.ensure_loaded()
                except EmbeddingError as exc:
                    warnings.append(
                        f"semantic ranking unavailable: {exc.message}; keyword matching used"
                    )
                    return None, False
        if not embedder.is_ready():
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
    # einsum, not ``@``: a matrix-vector product is memory-bound, and BLAS wakes its thread
    # pool for it, which next to a busy ONNX pool cost 5-7 ms even at 2,000 rows (einsum:
    # 0.14 ms there, and 5.6 ms against BLAS's 7.3 ms at 100k).
    sims = np.einsum("ij,j->i", index.vectors, query_vec.astype(np.float32, copy=False))
    top = min(k, len(sims))
    best = np.argpartition(sims, len(sims) - top)[len(sims) - top :]  # no negated copy
    # Ties broken by id so results are stable across runs.
    ordered = sorted(best.tolist(), key=lambda row: (-float(sims[row]), int(ids[row])))
    return [int(ids[row]) for row in ordered], sims


@dataclass
class Arms:
    """What the candidate search found (all ids are item ids)."""

    lexical: list[int] = field(default_factory=list)
    nearest: list[int] = field(default_factory=list)
    graph: set[int] = field(default_factory=set)
    similarity: dict[int, float] = field(default_factory=dict)
    query_vec: np.ndarray | None = None
    semantic_ok: bool = False


def _lexical_arm(
    tx: Tx, terms: list[str], index: DirectiveIndex, scope: Scope, k: int
) -> list[int]:
    # Runs in the reader's thread; the index's lexicon is only ever touched there, so no
    # lock. BM25 is computed here from the scope's own postings and lengths, not by the
    # backend's ranking, whose statistics span every scope of the store: one project's
    # answer must not move when another project sharing the store adds rules.
    lexicon = index.lexicon
    if lexicon is None:
        lexicon = index.lexicon = ScopeLexicon(tx.lexical.lengths(scope, kinds=(DIRECTIVE_KIND,)))
    unknown = [t for t in dict.fromkeys(terms) if t not in lexicon]
    if unknown:
        found = tx.lexical.term_frequencies(unknown, scope, kinds=(DIRECTIVE_KIND,))
        if lexicon.entries > _POSTINGS_CACHE_MAX:
            lexicon.clear()
        for term in unknown:
            lexicon.add(term, found.get(term, {}))
    rows = {t: lexicon.rows(t) for t in terms}
    lexical: list[int] = []
    # AND first (precise and cheap), then OR to fill up (DESIGN §7).
    for query in lexical_queries(terms, rows, max_rows=_OR_MAX_ROWS):
        if len(lexical) >= k // 2:
            break
        hits = lexicon.search(query, limit=k)
        seen = set(lexical)
        lexical += [hit.item_id for hit in hits if hit.item_id not in seen]
    return lexical[:k]


def _stored_semantic(
    tx: Tx, query_vec: np.ndarray, scope: Scope, k: int, others: set[int]
) -> tuple[list[int], dict[int, float]]:
    # Without vectors in memory: the store's vector search, then the stored vectors of
    # other candidates.
    similarity: dict[int, float] = {}
    nearest: list[int] = []
    for hit in tx.vectors.search(query_vec, scope, kinds=(DIRECTIVE_KIND,), k=k).hits:
        similarity[hit.item_id] = hit.score
        nearest.append(hit.item_id)
    stored = tx.vectors.vectors([i for i in others if i not in similarity])
    if stored:
        ids = list(stored)
        matrix = np.vstack([stored[i] for i in ids])
        for item_id, value in zip(ids, matrix @ query_vec, strict=True):
            similarity[item_id] = float(value)
    return nearest, similarity


async def search_arms(
    store: Store,
    index: DirectiveIndex,
    text: str,
    scope: Scope,
    embedder: Any,
    expand: Callable[[], set[int]],
    warnings: list[str],
    *,
    k: int,
    wait_s: float = 0.0,
) -> Arms:
    """Every candidate arm: lexical, semantic and graph expansion, overlapped.

    The lexical statements run in the reader's thread while this thread embeds the task,
    multiplies it with the in-memory vectors (numpy releases the GIL) and expands the graph
    (``expand``), so a query costs about the longest of them rather than their sum.
    Similarities cover the nearest neighbours and the lexical and graph candidates too, so
    every candidate gets a SemanticSim. Without vectors in memory the semantic arm is a
    vector-index search plus a fetch of stored vectors.
    """
    words = list(dict.fromkeys(t for t in tokenize(text) if t not in STOPWORDS and len(t) > 1))
    # The FTS terms of those words ("property-based" is two), as build_match quotes them.
    terms = fts_terms(" ".join(words))
    arms = Arms()

    async def lexical() -> None:
        arms.lexical = await store.read(lambda tx: _lexical_arm(tx, terms, index, scope, k))

    in_memory = None
    async with anyio.create_task_group() as group:
        group.start_soon(lexical)
        # Let the task queue its statement on the reader thread before this one gets busy.
        await anyio.lowlevel.checkpoint()
        arms.query_vec, arms.semantic_ok = await query_vector(
            embedder, text, warnings, wait_s=wait_s
        )
        if arms.query_vec is not None:
            in_memory = _in_memory_semantic(index, arms.query_vec, k)
        arms.graph = expand()
    if in_memory is not None:
        arms.nearest, sims = in_memory
        for item_id in {*arms.nearest, *arms.lexical, *arms.graph}:
            row = index.vector_row.get(item_id)
            if row is not None:
                arms.similarity[item_id] = float(sims[row])
    elif arms.query_vec is not None:
        query_vec, others = arms.query_vec, set(arms.lexical) | arms.graph
        arms.nearest, arms.similarity = await store.read(
            lambda tx: _stored_semantic(tx, query_vec, scope, k, others)
        )
    return arms
