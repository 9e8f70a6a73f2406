"""The retrieve pipeline's built-in steps (seed 004 §6.1, §7): route intention, sufficiency,
route category, sufficiency, recall (vector + lexical), verify / rerank, build context.

A layer judged sufficient stops the descent: the layers below it are not routed and no model
reranks. The items are still recalled (no model call) and ranked offline, so a retrieve never
comes back empty while items match; the context leads with the layer that sufficed.
"""

from __future__ import annotations

import numpy as np

from memory_core.llm.keyphrases import overlap, word_stems
from memory_core.pipeline.contract import State, StepSpec
from memory_core.pipeline.extraction import (
    query_terms,
    wants_intention,
    wants_overview,
)
from memory_core.pipeline.llm_calls import (
    RerankOut,
    SufficiencyOut,
)
from memory_core.pipeline.step_context import LLMHandle, StepContext
from memory_core.storage.layer import (
    ScopeFilter,
)

__all__ = [
    "build_context",
    "recall_items",
    "route_category",
    "route_intention",
    "sufficiency_check",
    "verify_rerank",
]


_RRF_K = 60


def _query_vector(ctx: StepContext, state: State) -> np.ndarray:
    return ctx.embed([state["query"]])[0]


def _filter(state: State) -> ScopeFilter:
    return {k: (tuple(v) if v is not None else None) for k, v in state["selector"].items()}


def route_intention(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    rows = ctx.store.latest_intentions(_filter(state))
    if not rows:
        return {"intention_hits": []}
    texts = [" ".join([*r.goals, *r.constraints, *r.progress]) or "-" for r in rows]
    scores = ctx.embed_cached(texts) @ _query_vector(ctx, state)
    hits = [
        {
            "scope": r.scope,
            "version": r.version,
            "goals": r.goals,
            "constraints": r.constraints,
            "progress": r.progress,
            "score": round(float(s), 4),
        }
        for r, s in zip(rows, scores, strict=True)
    ]
    hits.sort(key=lambda h: -float(h["score"]))  # type: ignore[arg-type]
    return {"intention_hits": hits[: int(spec.config.get("top", 3))]}


def sufficiency_check(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    layer = str(spec.config.get("layer", "category"))
    log = list(state.get("sufficiency", []))
    if state.get("sufficient"):
        return {"sufficient": True, "sufficiency": [*log, {"layer": layer, "skipped": True}]}
    query = state["query"]
    if layer == "intention":
        hits = state.get("intention_hits", [])
        context = hits
        has = any(h["goals"] or h["constraints"] or h["progress"] for h in hits)
        offline_ok = has and wants_intention(query)
    else:
        hits = state.get("category_hits", [])
        context = [{"name": h["name"], "summary": h["summary"]} for h in hits]
        threshold = float(spec.config.get("threshold", 0.55))
        offline_ok = bool(hits) and wants_overview(query) and hits[0]["score"] >= threshold
    if not context:
        sufficient, reason = False, "nothing at this layer"
    elif llm.offline:
        sufficient = offline_ok
        reason = "the query asks for this layer" if offline_ok else "descend for detail"
    else:
        out: SufficiencyOut = llm.call(
            SufficiencyOut, {"query": query, "layer": layer, "context": context}
        )
        sufficient, reason = out.sufficient, out.reason
    entry = {"layer": layer, "sufficient": sufficient, "reason": reason}
    return {"sufficient": sufficient, "sufficiency": [*log, entry]}


def route_category(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    if state.get("sufficient"):
        return {"category_hits": []}
    rows = [r for r in ctx.store.categories(_filter(state)) if r.item_count > 0]
    if not rows:
        return {"category_hits": []}
    texts = [f"{r.name}. {r.description} {r.summary}" for r in rows]
    scores = ctx.embed_cached(texts) @ _query_vector(ctx, state)
    hits = sorted(
        (
            {
                "scope": r.scope,
                "category_key": r.category_key,
                "name": r.name,
                "summary": r.summary,
                "anchor_ids": r.anchor_ids,
                "item_count": r.item_count,
                "score": round(float(s), 4),
            }
            for r, s in zip(rows, scores, strict=True)
        ),
        key=lambda h: (-float(h["score"]), str(h["category_key"])),  # type: ignore[arg-type]
    )
    return {"category_hits": hits[: int(spec.config.get("top_categories", 3))]}


def recall_items(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    policy = ctx.policy
    selector = _filter(state)
    wanted = state.get("options", {}).get("top_k") or spec.config.get("top_k", 50)
    top_k = min(int(wanted), policy.max_vector_top_k)
    fallbacks: list[str] = []
    qvec = _query_vector(ctx, state)
    arms: dict[str, list[tuple[str, float]]] = {}
    if not ctx.store.vector_capable:
        fallbacks.append("vector index unavailable: lexical recall and category anchors")
    elif ctx.store.count_items(selector) > policy.max_vector_scan_items:
        fallbacks.append(
            f"scope range holds over {policy.max_vector_scan_items} items: no vector scan, "
            "lexical recall and category anchors"
        )
    else:
        arms["vector"] = ctx.store.vector_search(selector, qvec, top_k)
    arms["lexical"] = ctx.store.lexical_search(selector, query_terms(state["query"]), top_k)
    top_categories = {(str(h["scope"]), h["category_key"]) for h in state.get("category_hits", [])}
    if fallbacks:
        anchors = [a for h in state.get("category_hits", []) for a in h["anchor_ids"]]
        arms["category"] = [(a, 1.0) for a in anchors]
    fused: dict[str, float] = {}
    found: dict[str, list[str]] = {}
    for arm, hits in arms.items():
        for rank, (item_id, _score) in enumerate(hits):
            fused[item_id] = fused.get(item_id, 0.0) + 1.0 / (_RRF_K + rank + 1)
            found.setdefault(item_id, []).append(arm)
    cap = policy.max_rerank_candidates // (2 if fallbacks else 1)
    order = sorted(fused, key=lambda i: (-fused[i], i))[: max(cap, 1)]
    candidates = []
    for row in ctx.store.items_by_id(order):
        cosine = float(row.embedding @ qvec) if row.embedding is not None else 0.0
        boost = 0.5 / _RRF_K if (str(row.scope), row.category_key) in top_categories else 0.0
        candidates.append(
            {
                "item_id": row.item_id,
                "scope": row.scope,
                "text": row.text,
                "category_key": row.category_key,
                "evidence": row.evidence,
                "confidence": row.confidence,
                "fused": round(fused[row.item_id] + boost, 6),
                "cosine": round(cosine, 4),
                "arms": found[row.item_id],
            }
        )
    candidates.sort(key=lambda c: (-float(c["fused"]), str(c["item_id"])))  # type: ignore[arg-type]
    return {"candidates": candidates, "fallbacks": fallbacks}


def verify_rerank(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    candidates = state.get("candidates", [])[: ctx.policy.max_rerank_candidates]
    keep = int(state.get("options", {}).get("keep") or spec.config.get("keep", 10))
    if not candidates:
        return {"ranked": []}
    if llm.offline or state.get("sufficient"):
        query = set(word_stems(state["query"]))
        scored = [
            (c["cosine"] + 0.5 * overlap(query, word_stems(c["text"])) + 10 * c["fused"], c)
            for c in candidates
        ]
        scored.sort(key=lambda p: (-p[0], p[1]["item_id"]))
        ranked = [{**c, "score": round(s, 4)} for s, c in scored]
    else:
        out: RerankOut = llm.call(
            RerankOut,
            {"query": state["query"], "candidates": [c["text"] for c in candidates]},
        )
        picked = [i for i in dict.fromkeys(out.order) if 0 <= i < len(candidates)]
        ranked = [{**candidates[i], "score": round(1.0 - n / 100, 4)} for n, i in enumerate(picked)]
    return {"ranked": ranked[:keep]}


def build_context(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    budget = int(
        state.get("options", {}).get("budget_tokens") or spec.config.get("budget_tokens", 1200)
    )
    lines: list[str] = []
    used = 0
    layer = "item"
    for entry in state.get("sufficiency", []):
        if entry.get("sufficient"):
            layer = entry["layer"]
            break

    def add(line: str) -> bool:
        nonlocal used
        cost = ctx.tokens.count(line) + 1
        if used + cost > budget:
            return False
        lines.append(line)
        used += cost
        return True

    intentions = state.get("intention_hits", [])
    for hit in intentions[:1]:
        for kind in ("goals", "constraints", "progress"):
            for text in hit[kind][:3]:
                add(f"[{kind[:-1] if kind != 'progress' else kind}] {text}")
    categories = state.get("category_hits", []) if layer != "intention" else []
    if layer == "category":
        for hit in categories:
            add(f"[category {hit['name']}] {hit['summary']}")
    items = []
    for item in state.get("ranked", []):
        if not add(f"- {item['text']}"):
            break
        items.append(item)
    return {
        "context": {
            "text": "\n".join(lines),
            "tokens": used,
            "layer": layer,
            "items": items,
            "categories": categories,
            "intention": intentions[0] if intentions else None,
        }
    }
