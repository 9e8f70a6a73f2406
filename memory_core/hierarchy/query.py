"""One hierarchy query, end to end: traverse, aggregate, budget, summarise, answer, log the run.

Failures the caller cannot fix by changing the call (nothing stored yet, every model failed) come
back as ``status="error"`` results with a hint, and are still recorded as runs; invalid calls
raise.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import structlog

from memory_core.config import HierarchySettings
from memory_core.errors import BudgetError, InvalidInputError, ModelError
from memory_core.hierarchy.aggregate import (
    Candidate,
    Collected,
    collect_for_summary,
    collect_within_budget,
    part_count,
    split_parts_with_sources,
)
from memory_core.hierarchy.results import Citation, ErrorInfo, QueryResult, UsedChunk
from memory_core.hierarchy.store import HierarchyStore
from memory_core.hierarchy.strategies import StrategyParams, validate_strategy
from memory_core.hierarchy.traverse import Traversal, traverse
from memory_core.hierarchy.tree_port import tree_port_for
from memory_core.models import utc_now
from memory_core.scope import Scope
from memory_core.tokens import TokenCounter

if TYPE_CHECKING:
    from memory_core.llm.agents import HierarchyAgents

__all__ = ["run_query"]

log = structlog.get_logger(__name__)
_MAX_QUESTION_CHARS = 4000


async def _sources(store: HierarchyStore, scope: Scope, uids: list[str]) -> dict[str, str]:
    port = tree_port_for(store)
    return await port.sources(scope, uids) if port is not None and uids else {}


def _used(candidate: Candidate, strategy: str, source: str | None) -> UsedChunk:
    chunk, path = candidate.chunk, candidate.path
    return UsedChunk(
        chunk_id=chunk.uid,
        item_id=chunk.chunk_id,
        text_content=chunk.text,
        category_path=path.label,
        ranked_relevance=path.ranked_relevance,
        confidence=path.path_confidence,
        created_at=chunk.created_at,
        chosen_strategy=strategy,
        token_count=chunk.token_count,
        source=source,
    )


async def _summaries(
    agents: HierarchyAgents,
    tokens: TokenCounter,
    question: str,
    collected: Collected,
    budget: int,
) -> tuple[list[dict[str, str]], dict[str, Any], dict[str, list[str]]]:
    """M contiguous parts, each summarised to at most floor(budget / M) tokens.

    Returns the summaries as passages, the run-log figures, and for each summary id the chunk
    ids it condensed (so a cited summary cites its chunks).
    """
    parts_wanted = part_count(collected.total_tokens, budget)
    texts = [c.chunk.text for c in collected.candidates]
    split = split_parts_with_sources(texts, parts_wanted, tokens)
    parts = [p.text for p in split]
    sources = {
        f"summary-{n}": [collected.candidates[i].chunk.uid for i in p.sources]
        for n, p in enumerate(split, start=1)
    }
    target = max(1, budget // len(parts))
    passages: list[dict[str, str]] = []
    part_tokens: list[int] = []
    summary_tokens: list[int] = []
    truncated = 0
    for number, part in enumerate(parts, start=1):
        outcome = await agents.summarise(
            question=question, text=part, target_tokens=target, part=number, parts=len(parts)
        )
        summary = outcome.output.summary.strip()
        # The budget is a hard limit: a model that overshoots is cut to its share.
        if tokens.count(summary) > target:
            summary = tokens.truncate(summary, target)
            truncated += 1
        part_tokens.append(tokens.count(part))
        summary_tokens.append(tokens.count(summary))
        passages.append(
            {"chunk_id": f"summary-{number}", "category_path": f"part {number}", "text": summary}
        )
    info = {
        "parts": len(parts),
        "parts_wanted": parts_wanted,
        "part_tokens": part_tokens,
        "summary_target_tokens": target,
        "summary_tokens": summary_tokens,
        "summaries_truncated": truncated,
    }
    return passages, info, sources


def _error(result: QueryResult, code: str, message: str, hint: str) -> QueryResult:
    result.status = "error"
    result.error = ErrorInfo(code=code, message=message, hint=hint)
    return result


async def run_query(
    store: HierarchyStore,
    agents: HierarchyAgents,
    *,
    tokens: TokenCounter,
    settings: HierarchySettings,
    params: StrategyParams,
    scope: Scope,
    question: str,
    strategy: str,
    budget: int,
    summarize: bool,
    run_kind: str,
) -> QueryResult:
    """Run one query (see :meth:`HierarchyService.query`).

    Raises:
        InvalidInputError: empty or over-long question, unknown strategy.
        BudgetError: budget below 1.
    """
    started = time.perf_counter()
    question = " ".join((question or "").split())
    if not question:
        raise InvalidInputError("the question is empty", hint="ask a question in words")
    if len(question) > _MAX_QUESTION_CHARS:
        raise InvalidInputError(
            f"the question has {len(question)} characters",
            hint=f"keep it under {_MAX_QUESTION_CHARS}",
        )
    chosen = validate_strategy(strategy)
    if budget < 1:
        raise BudgetError(
            f"max_token_budget must be at least 1, got {budget}", hint="pass a positive --budget"
        )
    result = QueryResult(
        question=question,
        scope=scope.key,
        strategy=chosen,
        max_token_budget=budget,
        timestamp=utc_now(),
    )
    walk = Traversal()
    collected = Collected()
    summary_info: dict[str, Any] = {}
    try:
        if await store.count_categories(scope) == 0:
            _error(
                result,
                "empty_hierarchy",
                f"nothing has been ingested in scope {scope.key!r}",
                "save knowledge first: the ingest tool, `memoir ingest FILE`, or ingest_text()",
            )
        else:
            walk = await traverse(
                store,
                agents,
                scope=scope,
                question=question,
                strategy=chosen,
                depth=settings.depth,
                params=params,
            )
            result.explored_paths = [p.label for p in walk.leaves]
            if summarize:
                collected = await collect_for_summary(
                    store, scope, walk.leaves, budget, settings.max_summary_parts
                )
            else:
                collected = await collect_within_budget(store, scope, walk.leaves, budget)
            result.dropped_paths = collected.dropped_paths
            result.empty_leaves = collected.empty_leaves + walk.dead_ends
            result.candidate_tokens = collected.total_tokens
            sources = await _sources(store, scope, [c.chunk.uid for c in collected.candidates])
            result.used_chunks = [
                _used(c, chosen, sources.get(c.chunk.uid)) for c in collected.candidates
            ]
            if result.empty_leaves:
                result.warnings.append(
                    f"{len(result.empty_leaves)} selected categories hold no chunks: "
                    + "; ".join(result.empty_leaves[:5])
                )
            if not collected.candidates and collected.stopped_at:
                _error(
                    result,
                    "no_chunks",
                    f"no chunk fits the budget of {budget} tokens: the first one selected has "
                    f"{collected.stopped_tokens}; dropped: {'; '.join(collected.dropped_paths)}",
                    f"raise max_token_budget (--budget) to at least {collected.stopped_tokens}",
                )
            elif not collected.candidates:
                _error(
                    result,
                    "no_chunks",
                    "the selected categories hold no chunks",
                    "ingest more text, or try --strategy wide_branch to explore more categories",
                )
                log.error("no chunks for query", paths=result.explored_paths[:10])
            else:
                await _answer(
                    result, agents, tokens, question, collected, budget, summarize, summary_info
                )
    except ModelError as error:
        _error(result, error.code, error.message, error.hint or "check the [llm] settings")
        log.error("query failed", error=error.message[:300])
    stats = agents.stats
    result.warnings.extend(agents.warnings())
    result.model_used = stats.models_used
    result.llm_calls = dict(stats.calls)
    result.total_latency = round(time.perf_counter() - started, 6)
    result.run_id = await store.record_run(
        scope,
        run_kind,
        result.total_latency * 1000,
        {
            "question": question[:200],
            "status": result.status,
            "error": result.error.model_dump() if result.error else None,
            "strategy": chosen,
            "levels": walk.levels,
            "explored_paths": result.explored_paths,
            "confidences": [
                {"path": p.label, "confidence": list(p.confidence), "relevance": list(p.relevance)}
                for p in walk.leaves
            ],
            "candidate_tokens": collected.total_tokens,
            "budget": budget,
            "summarized": result.summarized,
            **summary_info,
            "dropped_paths": result.dropped_paths,
            "empty_leaves": result.empty_leaves,
            "rows_read": collected.rows_read,
            "stopped_at": collected.stopped_at,
            "ranked": [
                {"chunk_id": c.chunk_id, "path": c.category_path} for c in result.used_chunks
            ],
            **stats.as_dict(),
            "latency_s": result.total_latency,
            "models": {s: m.record() for s, m in agents.models.items()},
        },
    )
    log.info(
        "hierarchy query",
        run_id=result.run_id,
        status=result.status,
        strategy=chosen,
        candidate_tokens=collected.total_tokens,
        budget=budget,
        summarized=result.summarized,
        parts=result.parts,
        dropped_paths=len(result.dropped_paths),
        latency_s=result.total_latency,
        models={s: m.record() for s, m in agents.models.items()},
    )
    return result


async def _answer(
    result: QueryResult,
    agents: HierarchyAgents,
    tokens: TokenCounter,
    question: str,
    collected: Collected,
    budget: int,
    summarize: bool,
    summary_info: dict[str, Any],
) -> None:
    by_uid = {c.chunk_id: c for c in result.used_chunks}
    condensed: dict[str, list[str]] = {}
    if summarize and collected.total_tokens > budget:
        passages, info, condensed = await _summaries(agents, tokens, question, collected, budget)
        summary_info.update(info)
        result.summarized = True
        result.parts = info["parts"]
    else:
        passages = [
            {"chunk_id": c.chunk_id, "category_path": c.category_path, "text": c.text_content}
            for c in result.used_chunks
        ]
    outcome = await agents.answer(question=question, passages=passages)
    result.answer = outcome.output.answer
    # A cited summary stands for the chunks it condensed.
    cited_ids = [
        uid for cited in outcome.output.cited_chunk_ids for uid in condensed.get(cited, [cited])
    ]
    cited = [by_uid[c] for c in dict.fromkeys(cited_ids) if c in by_uid]
    if not cited:
        cited = list(result.used_chunks)
    result.citations = [
        Citation(chunk_id=c.chunk_id, category_path=c.category_path, source=c.source) for c in cited
    ]
