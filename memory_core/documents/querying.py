"""Search, RQL and context over documents: the engine's hits turned into Recall responses.

Ordering follows the spec exactly: with a search, ``score DESC, doc.path ASC, chunk.offset ASC,
chunk.id ASC``; an explicit ``ORDER BY`` is respected as given. Filters are parsed by FEL and
compiled to parameterised SQL that runs inside each arm.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory_core.documents import persistence
from memory_core.documents.fel import FIELD_MAP, FilterLimits, parse_filter
from memory_core.documents.packer_adapter import pack_hits
from memory_core.documents.records import CHUNK_KIND, DOC_KIND, ChunkRecord, DocRecord
from memory_core.documents.responses import (
    ChunkOut,
    DocOut,
    QueryInfo,
    ResultOut,
    SearchResponse,
    StatsOut,
)
from memory_core.documents.rql import RqlQuery, parse_rql
from memory_core.errors import InvalidInputError
from memory_core.filters import Filter
from memory_core.retrieval.engine import Hit, SearchMode, SearchOutcome, SearchRequest
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.context import CoreContext

__all__ = ["round_score", "run_context", "run_rql", "run_search"]

_MAX_QUERY_CHARS = 10_000


def round_score(value: float) -> float:
    return round(float(value), 6)


def _check_query(text: str) -> str:
    if not text or not text.strip():
        raise InvalidInputError(
            "the query is empty", hint="pass the words to search for, e.g. memoir search 'retry'"
        )
    if len(text) > _MAX_QUERY_CHARS:
        raise InvalidInputError(
            f"the query is {len(text)} characters, over {_MAX_QUERY_CHARS}",
            hint="shorten the query",
        )
    return text


def _limits(ctx: CoreContext) -> FilterLimits:
    limits = ctx.settings.limits
    return FilterLimits(max_depth=limits.filter_depth, max_terms=limits.filter_terms)


def _filter(text: str | None, limits: FilterLimits) -> Filter | None:
    if text is None or not text.strip():
        return None
    return parse_filter(text, limits)


def _doc_out(doc: DocRecord, fields: Sequence[str] | None = None) -> DocOut | None:
    values = {
        "doc.id": doc.doc_id,
        "doc.path": doc.path,
        "doc.mtime": doc.mtime,
        "doc.hash": doc.content_hash,
        "doc.tag": ",".join(doc.tags) if doc.tags else None,
        "doc.source": doc.source,
    }
    if fields is not None:
        chosen = {k: v for k, v in values.items() if k in fields or "*" in fields}
        if not chosen:
            return None
        values = chosen
    out = DocOut.model_validate({k.split(".", 1)[1]: v for k, v in values.items()})
    if (fields is None or "*" in fields or "doc.tag" in fields) and doc.tags:
        out.tags = list(doc.tags)
    return out


def _chunk_out(chunk: ChunkRecord, fields: Sequence[str] | None = None) -> ChunkOut | None:
    values: dict[str, Any] = {
        "chunk.id": chunk.chunk_id,
        "chunk.doc_id": chunk.doc.doc_id,
        "chunk.offset": chunk.offset,
        "chunk.tokens": chunk.tokens,
        "chunk.text": chunk.text,
    }
    if fields is not None:
        values = {k: v for k, v in values.items() if k in fields or "*" in fields}
        if not values:
            return None
    out = ChunkOut.model_validate({k.split(".", 1)[1]: v for k, v in values.items()})
    if fields is None or "*" in fields or "chunk.offset" in fields:
        out.end_offset = chunk.end_offset
    return out


def _explain(hit: Hit, outcome: SearchOutcome) -> dict[str, Any]:
    data: dict[str, Any] = {
        "lexical": round_score(hit.lexical.score) if hit.lexical else None,
        "semantic": round_score(hit.semantic.score) if hit.semantic else None,
        "lexical_rank": hit.lexical.rank if hit.lexical else None,
        "semantic_rank": hit.semantic.rank if hit.semantic else None,
        "bm25": round_score(hit.lexical.raw) if hit.lexical else None,
        "distance": round_score(hit.semantic.raw) if hit.semantic else None,
        "fused": round_score(hit.score),
        "fusion": outcome.fusion if outcome.mode == "hybrid" else outcome.mode,
    }
    return data


def _engine_explain(outcome: SearchOutcome, settings: Any) -> dict[str, Any]:
    return {
        "mode": outcome.mode,
        "fusion": outcome.fusion,
        "rrf_k": settings.rrf_k,
        "weights": {"lexical": settings.bm25_weight, "semantic": settings.vector_weight},
        "lexical_terms": list(outcome.lexical_terms),
        "lexical_operator": outcome.lexical_operator,
        "vector_strategy": outcome.vector_strategy,
        "candidates": {
            "lexical": outcome.lexical_candidates,
            "semantic": outcome.semantic_candidates,
        },
        "took_ms": outcome.took_ms,
        "scores": "lexical = -bm25 (higher is better); semantic = cosine similarity; "
        "fused = the fusion score used for ranking",
    }


def _spec_key(hit: Hit, chunk: ChunkRecord) -> tuple[Any, ...]:
    return (-round_score(hit.score), chunk.doc.path, chunk.offset, chunk.chunk_id)


async def _snapshot(ctx: CoreContext, scope: Scope) -> str:
    """The spec's ``stats.snapshot``: the newest ``doc.mtime`` (empty for an empty store)."""
    totals = await ctx.store.read(lambda tx: tx.resources.totals(scope, kinds=[DOC_KIND]))
    return totals.newest_mtime or ""


async def _ranked(
    ctx: CoreContext,
    *,
    query: str,
    scope: Scope,
    k: int,
    mode: SearchMode,
    where: Filter | None,
    lexical_text: str | None = None,
    semantic_text: str | None = None,
    wait: float = 0.0,
) -> tuple[list[tuple[Hit, ChunkRecord]], SearchOutcome]:
    # Every candidate of the arms is ranked here (the spec's tie-breaks need the documents),
    # and a fixed minimum pool keeps pages of one query consistent with each other.
    depth = min(4096, max(100, 2 * k))
    outcome = await ctx.engine.search(
        SearchRequest(
            text=query,
            scope=scope,
            kinds=(CHUNK_KIND,),
            k=depth,
            mode=mode,
            where=where,
            lexical_text=lexical_text,
            semantic_text=semantic_text,
            fetch_k=depth,
            enough=k,
            wait_for_embedder=wait,
        )
    )
    # Only the first ``k`` by score (and whatever ties the k-th) can be returned; fetch those,
    # then apply the spec's tie-breaks, which need the document path and chunk offset.
    ranked = sorted(outcome.hits, key=lambda h: (-round_score(h.score), h.item_id))
    if len(ranked) > k:
        boundary = round_score(ranked[k - 1].score)
        cut = k
        while cut < len(ranked) and round_score(ranked[cut].score) == boundary:
            cut += 1
        ranked = ranked[:cut]
    ids = [h.item_id for h in ranked]
    chunks = await ctx.store.read(lambda tx: persistence.chunks_by_ids(tx, ids))
    pairs = [(h, chunks[h.item_id]) for h in ranked if h.item_id in chunks]
    pairs.sort(key=lambda pair: _spec_key(*pair))
    return pairs, outcome


async def run_search(
    ctx: CoreContext,
    query: str,
    *,
    scope: Scope,
    k: int | None = None,
    mode: SearchMode = "hybrid",
    filter: str | None = None,
    explain: bool = False,
    wait: float = 0.0,
) -> SearchResponse:
    """``memoir search``: top-k chunks (see ``DocumentService.search``)."""
    started = time.perf_counter()
    _check_query(query)
    k = ctx.settings.search.default_k if k is None else k
    if not 1 <= k <= 10_000:
        raise InvalidInputError(f"--k {k} is out of range", hint="use --k between 1 and 10000")
    where = _filter(filter, _limits(ctx))
    pairs, outcome = await _ranked(
        ctx, query=query, scope=scope, k=k, mode=mode, where=where, wait=wait
    )
    results = [
        ResultOut(
            score=round_score(hit.score),
            doc=_doc_out(chunk.doc),
            chunk=_chunk_out(chunk),
            explain=_explain(hit, outcome) if explain else None,
        )
        for hit, chunk in pairs[:k]
    ]
    return SearchResponse(
        query=QueryInfo(text=query, filters=filter, limit=k, offset=0, mode=outcome.mode),
        results=results,
        stats=StatsOut(
            took_ms=round((time.perf_counter() - started) * 1000, 2),
            total_hits=len(outcome.hits),
            snapshot=await _snapshot(ctx, scope),
        ),
        warnings=list(outcome.warnings),
        explain=_engine_explain(outcome, ctx.settings.search) if explain else None,
    )


def _field_value(chunk: ChunkRecord, field: str) -> Any:
    doc = chunk.doc
    return {
        "doc.id": doc.doc_id,
        "doc.path": doc.path,
        "doc.mtime": doc.mtime or "",
        "doc.hash": doc.content_hash,
        "doc.source": doc.source or "",
        "chunk.id": chunk.chunk_id,
        "chunk.doc_id": doc.doc_id,
        "chunk.offset": chunk.offset,
        "chunk.tokens": chunk.tokens,
        "chunk.text": chunk.text,
    }[field]


async def run_rql(
    ctx: CoreContext, rql: str, *, scope: Scope, explain: bool = False, wait: float = 0.0
) -> SearchResponse:
    """``memoir query --rql``: parse and execute one statement (see ``DocumentService``)."""
    started = time.perf_counter()
    parsed: RqlQuery = parse_rql(rql, _limits(ctx))
    limit = parsed.limit or ctx.settings.search.max_limit
    offset = parsed.offset
    where = parsed.filter
    warnings: list[str] = []
    if parsed.ignored_fields:
        warnings.append("ignored unknown SELECT fields: " + ", ".join(parsed.ignored_fields))
    fields = parsed.fields or ("*",)
    with_score = "score" in fields or "*" in fields
    engine: dict[str, Any] | None = None
    results: list[ResultOut] = []
    total = 0
    if parsed.uses_search:
        mode: SearchMode = (
            "hybrid"
            if parsed.semantic is not None and parsed.lexical is not None
            else ("semantic" if parsed.semantic is not None else "lexical")
        )
        query_text = parsed.semantic or parsed.lexical or ""
        wanted = offset + limit
        if parsed.table == "doc":
            wanted = min(10_000, wanted * 4)  # several chunks per document
        if parsed.order_by and parsed.order_by != "score":
            # Ordered by a field: order a fixed pool of the best matches, so pages agree.
            wanted = min(10_000, max(200, wanted * 4))
        pairs, outcome = await _ranked(
            ctx,
            query=query_text,
            scope=scope,
            k=min(10_000, wanted + 1),
            mode=mode,
            where=where,
            lexical_text=parsed.lexical or "",
            semantic_text=parsed.semantic or "",
            wait=wait,
        )
        warnings.extend(outcome.warnings)
        if explain:
            engine = _engine_explain(outcome, ctx.settings.search)
        rows: list[tuple[Hit, ChunkRecord]] = pairs
        if parsed.table == "doc":
            best: dict[str, tuple[Hit, ChunkRecord]] = {}
            for hit, chunk in pairs:  # pairs are best first: the first per doc is its max
                best.setdefault(chunk.doc.doc_id, (hit, chunk))
            rows = list(best.values())
        if parsed.order_by and parsed.order_by != "score":
            rows.sort(
                key=lambda pair: _field_value(pair[1], parsed.order_by or ""),
                reverse=parsed.descending,
            )
        elif parsed.order_by == "score" and not parsed.descending:
            rows.reverse()
        total = len(rows) if parsed.table == "doc" else len(outcome.hits)
        for hit, chunk in rows[offset : offset + limit]:
            results.append(
                ResultOut(
                    score=round_score(hit.score) if with_score else None,
                    doc=_doc_out(chunk.doc, fields),
                    chunk=_chunk_out(chunk, fields) if parsed.table == "chunk" else None,
                    explain=_explain(hit, outcome) if explain else None,
                )
            )
    else:
        if parsed.order_by == "score":
            warnings.append("ORDER BY score is ignored without USING")
        order_by = (
            FIELD_MAP[parsed.order_by] if parsed.order_by and parsed.order_by != "score" else None
        )
        if parsed.table == "chunk":
            ids, total = await ctx.store.read(
                lambda tx: tx.items.select(
                    scope,
                    kinds=[CHUNK_KIND],
                    where=where,
                    order_by=order_by,
                    descending=parsed.descending,
                    limit=limit,
                    offset=offset,
                )
            )
        else:
            ids, total = await ctx.store.read(
                lambda tx: tx.resources.select(
                    scope,
                    kinds=[DOC_KIND],
                    item_kinds=[CHUNK_KIND],
                    where=where,
                    order_by=order_by,
                    descending=parsed.descending,
                    limit=limit,
                    offset=offset,
                )
            )
        if parsed.table == "chunk":
            chunks = await ctx.store.read(lambda tx: persistence.chunks_by_ids(tx, ids))
            for item_id in ids:
                if item_id in chunks:
                    chunk = chunks[item_id]
                    results.append(
                        ResultOut(doc=_doc_out(chunk.doc, fields), chunk=_chunk_out(chunk, fields))
                    )
        else:
            docs = await ctx.store.read(lambda tx: persistence.documents_by_ids(tx, ids))
            results = [ResultOut(doc=_doc_out(docs[i], fields)) for i in ids if i in docs]
    next_offset = offset + limit if total > offset + limit else None
    return SearchResponse(
        query=QueryInfo(
            text=parsed.semantic or parsed.lexical,
            rql=rql,
            filters=None,
            limit=limit,
            offset=offset,
        ),
        results=results,
        stats=StatsOut(
            took_ms=round((time.perf_counter() - started) * 1000, 2),
            total_hits=total,
            snapshot=await _snapshot(ctx, scope),
        ),
        warnings=warnings,
        next_offset=next_offset,
        explain=engine,
    )


async def run_context(
    ctx: CoreContext,
    query: str,
    *,
    scope: Scope,
    budget_tokens: int,
    diversity: int | None = None,
    k: int | None = None,
    mode: SearchMode = "hybrid",
    filter: str | None = None,
    wait: float = 0.0,
) -> SearchResponse:
    """``memoir context``: a packed window with provenance (see ``DocumentService.context``)."""
    started = time.perf_counter()
    _check_query(query)
    k = max(50, ctx.settings.search.default_k) if k is None else k
    if not 1 <= k <= 10_000:
        raise InvalidInputError(f"--k {k} is out of range", hint="use --k between 1 and 10000")
    where = _filter(filter, _limits(ctx))
    pairs, outcome = await _ranked(
        ctx, query=query, scope=scope, k=k, mode=mode, where=where, wait=wait
    )
    context = pack_hits(
        [chunk for _, chunk in pairs[:k]],
        budget_tokens=budget_tokens,
        diversity=diversity,
        tokens=ctx.tokens,
    )
    return SearchResponse(
        query=QueryInfo(text=query, filters=filter, limit=k, offset=0, mode=outcome.mode),
        context=context,
        stats=StatsOut(
            took_ms=round((time.perf_counter() - started) * 1000, 2),
            total_hits=len(outcome.hits),
            snapshot=await _snapshot(ctx, scope),
        ),
        warnings=list(outcome.warnings),
    )
