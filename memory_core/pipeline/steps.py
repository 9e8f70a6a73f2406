"""The built-in steps of the memorize / retrieve / evolve pipelines (seed 004 §8.1).

A step is ``fn(ctx, spec, state, llm) -> produced``: it reads JSON values from ``state``, may
use the service's store, embedder and taxonomy through ``ctx``, and returns the JSON values it
produces. ``llm`` is the step's resolved profile: offline steps use
:mod:`memory_core.pipeline.extraction`, others a typed pydantic-ai call.
"""

from __future__ import annotations

import hashlib
import mimetypes
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.llm.keyphrases import overlap, word_stems
from memory_core.pipeline.contract import State, StepSpec
from memory_core.pipeline.extraction import (
    build_text,
    intention_from,
    item_id_for,
    offline_extract,
    query_terms,
    stability_of,
    wants_intention,
    wants_overview,
)
from memory_core.pipeline.llm_calls import (
    CategoryChoices,
    ExtractedItems,
    IntentionOut,
    RerankOut,
    SufficiencyOut,
    run_agent,
)
from memory_core.pipeline.profiles import LayerProfile
from memory_core.pipeline.scopes import ScopeSpec, SelectorPolicy
from memory_core.storage.layer import (
    CategoryRow,
    IntentionRow,
    ItemRow,
    LayerStore,
    ResourceRow,
    ScopeFilter,
)
from memory_core.tokens import TokenCounter

__all__ = ["BUILTIN_STEPS", "LLMHandle", "StepContext", "StepFn"]

_RRF_K = 60
_EMBED_CACHE = 20_000


@dataclass
class LLMHandle:
    """The step's resolved profile, and the usage of its calls (for the run log)."""

    profile: LayerProfile
    usage: list[dict[str, Any]] = field(default_factory=list)

    @property
    def offline(self) -> bool:
        return self.profile.is_offline

    def call(self, output_type: Any, payload: Any) -> Any:
        output, usage = run_agent(self.profile, output_type, payload)
        self.usage.append(usage)
        return output


@dataclass
class StepContext:
    """What steps may use besides the state: store, scope schema, embedder, taxonomy."""

    store: LayerStore
    scope_spec: ScopeSpec
    embed: Callable[[Sequence[str]], np.ndarray]
    taxonomy: list[dict[str, str]]
    policy: SelectorPolicy
    tokens: TokenCounter
    clock: Callable[[], float]
    _category_vectors: np.ndarray | None = None
    _cache: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict)

    def category_vectors(self) -> np.ndarray:
        if self._category_vectors is None:
            self._category_vectors = self.embed(
                [f"{c['name']}. {c['description']}" for c in self.taxonomy]
            )
        return self._category_vectors

    def embed_cached(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of texts that repeat across runs (category and intention texts)."""
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._cache]
        if missing:
            fresh = self.embed([texts[i] for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                self._cache[keys[i]] = vector
        vectors = [self._cache[k] for k in keys]
        for k in keys:
            self._cache.move_to_end(k)
        while len(self._cache) > _EMBED_CACHE:
            self._cache.popitem(last=False)
        return np.vstack(vectors) if vectors else np.zeros((0, 1), dtype=np.float32)


StepFn = Callable[[StepContext, StepSpec, State, LLMHandle], Mapping[str, Any]]


def _exact(scope: Mapping[str, str]) -> ScopeFilter:
    return {k: (v,) for k, v in scope.items()}


def _vec(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# -- memorize ----------------------------------------------------------------------------------


def _read_uri(uri: str) -> bytes:
    path = Path(uri[7:] if uri.startswith("file://") else uri)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise NotFoundError(
            f"cannot read resource URI {uri!r}: {exc.strerror or exc}",
            hint="pass a readable local path or file:// URI, or the content itself",
        ) from exc


def _mime_of(inp: Mapping[str, Any]) -> str | None:
    if inp.get("mime"):
        return str(inp["mime"])
    if inp.get("uri"):
        return mimetypes.guess_type(str(inp["uri"]))[0]
    return None


def resource_hash(inp: Mapping[str, Any]) -> str:
    """The content hash of a resource input (messages, content, or the bytes at its URI)."""
    import json

    if inp.get("messages") is not None:
        raw = json.dumps(inp["messages"], sort_keys=True, ensure_ascii=False).encode()
    elif inp.get("content") is not None:
        raw = str(inp["content"]).encode()
    elif inp.get("uri"):
        raw = _read_uri(str(inp["uri"]))
    else:
        raise InvalidInputError(
            "a resource needs messages, content or a uri",
            hint="memorize(scope, conversation=[...]) or memorize(scope, content=...|uri=...)",
        )
    return hashlib.sha256(raw).hexdigest()


def ingest_resource(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    inp = state["resource_input"]
    scope = state["scope"]
    mime = _mime_of(inp)
    segments: list[dict[str, Any]] = []
    stored_content: str | None = None
    if inp.get("messages") is not None:
        text, segments = build_text(inp["messages"])
        stored_content = text
    elif inp.get("content") is not None:
        text = stored_content = str(inp["content"])
    else:
        raw = _read_uri(str(inp["uri"]))
        binary = mime is not None and not mime.startswith("text/") and mime != "application/json"
        text = "" if binary else raw.decode("utf-8", errors="replace")
    revision = int(state.get("pipeline_revision", 0))
    key = "\x1f".join([*(f"{k}={scope[k]}" for k in sorted(scope)), state["content_hash"]])
    resource_id = "rs_" + hashlib.sha256(f"{key}\x1f{revision}".encode()).hexdigest()[:20]
    ctx.store.add_resource(
        ResourceRow(
            resource_id=resource_id,
            scope=dict(scope),
            kind=str(inp.get("kind", "conversation")),
            content_hash=state["content_hash"],
            pipeline_revision=revision,
            uri=inp.get("uri"),
            content=stored_content,
            mime=mime,
            metadata=dict(inp.get("metadata") or {}),
            created_at=ctx.clock(),
        )
    )
    resource = {"resource_id": resource_id, "kind": inp.get("kind"), "uri": inp.get("uri")}
    return {"resource": {**resource, "mime": mime}, "text": text, "segments": segments}


def preprocess_multimodal(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    resource = state["resource"]
    mime = resource.get("mime") or ""
    missing: list[dict[str, str]] = []
    artifacts: dict[str, Any] = {}
    text, segments = state.get("text", ""), state.get("segments", [])
    if mime == "application/pdf":
        try:
            import pypdf  # type: ignore[import-not-found]
        except ImportError:
            missing.append(
                {"capability": "pdf_text", "hint": "pip install pypdf to extract PDF text"}
            )
        else:
            reader = pypdf.PdfReader(str(resource["uri"]).removeprefix("file://"))
            pages = [page.extract_text() or "" for page in reader.pages]
            parts, segments, offset = [], [], 0
            for number, page_text in enumerate(pages, start=1):
                segments.append({"page": number, "start": offset, "end": offset + len(page_text)})
                parts.append(page_text)
                offset += len(page_text) + 2
            text = "\n\n".join(parts)
            artifacts["pdf_text"] = {"pages": len(pages), "chars": len(text)}
    elif mime.startswith("image/"):
        missing.append(
            {"capability": "ocr", "hint": "no local OCR engine or vision profile is configured"}
        )
    elif mime.startswith("audio/") or mime.startswith("video/"):
        missing.append(
            {"capability": "transcription", "hint": "no audio provider profile is configured"}
        )
    return {
        "text": text,
        "segments": segments,
        "artifacts": artifacts,
        "missing_capabilities": missing,
    }


def extract_items(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    text = state.get("text", "")
    resource_id = state["resource"]["resource_id"]
    max_items = int(spec.config.get("max_items", 40))
    if not text.strip():
        return {"candidates": []}
    if llm.offline:
        found = offline_extract(text, state.get("segments", []), resource_id, max_items=max_items)
    else:
        out: ExtractedItems = llm.call(ExtractedItems, {"resource_text": text[:20000]})
        found = []
        for item in out.items[:max_items]:
            start = text.find(item.quote) if item.quote else -1
            span = [start, start + len(item.quote)] if start >= 0 else None
            found.append(
                {
                    "text": item.text,
                    "evidence": [{"resource_id": resource_id, "span": span, "quote": item.quote}],
                    "confidence": item.confidence,
                    "stability": item.stability,
                }
            )
    for candidate in found:
        candidate["item_id"] = item_id_for(state["scope"], candidate["text"])
    return {"candidates": found}


def dedupe_merge(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    candidates = state.get("candidates", [])
    threshold = float(spec.config.get("merge_threshold", 0.92))
    scope = state["scope"]
    if not candidates:
        return {"item_plan": {"new": [], "merged": []}}
    vectors = ctx.embed([c["text"] for c in candidates])
    existing = {row.item_id for row in ctx.store.items_by_id([c["item_id"] for c in candidates])}
    new: list[dict[str, Any]] = []
    merged: dict[str, dict[str, Any]] = {}
    accepted: list[np.ndarray] = []
    for candidate, vector in zip(candidates, vectors, strict=True):
        target = candidate["item_id"] if candidate["item_id"] in existing else None
        if target is None and ctx.store.vector_capable:
            hits = ctx.store.vector_search(_exact(scope), vector, 1)
            if hits and hits[0][1] >= threshold:
                target = hits[0][0]
        if target is None and accepted:
            sims = np.vstack(accepted) @ vector
            best = int(np.argmax(sims))
            if sims[best] >= threshold:
                new[best]["evidence"].extend(candidate["evidence"])
                continue
        if target is not None:
            entry = merged.setdefault(target, {"item_id": target, "evidence": [], "confidence": 0})
            entry["evidence"].extend(candidate["evidence"])
            entry["confidence"] = max(entry["confidence"], candidate["confidence"])
            continue
        new.append({**candidate, "embedding": [float(x) for x in vector]})
        accepted.append(vector)
    return {"item_plan": {"new": new, "merged": list(merged.values())}}


def _offline_categories(ctx: StepContext, texts: Sequence[str], vectors: np.ndarray) -> list[str]:
    if not texts:
        return []
    cat_vectors = ctx.category_vectors()
    cat_words = [word_stems(f"{c['name']} {c['description']}") for c in ctx.taxonomy]
    cosines = np.asarray(vectors, dtype=np.float32) @ cat_vectors.T
    out = []
    for row, text in enumerate(texts):
        stems = set(word_stems(text))
        scores = [
            float(cosines[row, j]) + 0.5 * overlap(stems, cat_words[j])
            for j in range(len(cat_words))
        ]
        best = max(range(len(scores)), key=lambda j: (scores[j], -j))
        out.append(ctx.taxonomy[best]["key"])
    return out


def _categorise(
    ctx: StepContext, llm: LLMHandle, texts: Sequence[str], vectors: np.ndarray
) -> list[str]:
    fallback = _offline_categories(ctx, texts, vectors)
    if llm.offline or not texts:
        return fallback
    keys = {c["key"] for c in ctx.taxonomy}
    out: CategoryChoices = llm.call(
        CategoryChoices, {"taxonomy": ctx.taxonomy, "items": list(texts)}
    )
    chosen = list(fallback)
    for choice in out.choices:
        if 0 <= choice.index < len(chosen) and choice.category_key in keys:
            chosen[choice.index] = choice.category_key
    return chosen


def categorize_items(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    new = state["item_plan"]["new"]
    if not new:
        return {"assignments": {}}
    vectors = np.asarray([n["embedding"] for n in new], dtype=np.float32)
    keys = _categorise(ctx, llm, [n["text"] for n in new], vectors)
    return {"assignments": {n["item_id"]: key for n, key in zip(new, keys, strict=True)}}


def _intention(
    llm: LLMHandle, pairs: Sequence[tuple[str, str]], previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    if llm.offline:
        return intention_from(pairs, previous)
    out: IntentionOut = llm.call(
        IntentionOut, {"previous": previous or {}, "items": [t for _, t in pairs]}
    )
    return {
        "goals": out.goals,
        "constraints": out.constraints,
        "progress": out.progress,
        "source_item_ids": [i for i, _ in pairs],
    }


def _previous_intention(ctx: StepContext, scope: Mapping[str, str]) -> dict[str, Any] | None:
    rows = ctx.store.latest_intentions(_exact(scope))
    if not rows:
        return None
    r = rows[0]
    return {
        "version": r.version,
        "goals": r.goals,
        "constraints": r.constraints,
        "progress": r.progress,
        "source_item_ids": r.source_item_ids,
    }


def infer_intention(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    plan = state["item_plan"]
    pairs = [(n["item_id"], n["text"]) for n in plan["new"]]
    merged_rows = ctx.store.items_by_id([m["item_id"] for m in plan["merged"]])
    pairs += [(r.item_id, r.text) for r in merged_rows]
    previous = _previous_intention(ctx, state["scope"])
    intention = _intention(llm, pairs, previous)
    intention["previous_version"] = previous["version"] if previous else 0
    return {"intention": intention}


def refresh_categories(
    ctx: StepContext, scope: Mapping[str, str], keys: Sequence[str] | None, anchors: int
) -> dict[str, int]:
    """Recompute item counts, anchors (items nearest the centroid, by confidence) and
    extractive summaries of the given categories of one scope (all when ``keys`` is None)."""
    wanted = {c["key"] for c in ctx.taxonomy} if keys is None else set(keys)
    members: dict[str, list[ItemRow]] = {k: [] for k in wanted}
    for row in ctx.store.items(_exact(scope)):
        if row.category_key in members:
            members[row.category_key].append(row)
    rows = []
    counts = {}
    for category in ctx.taxonomy:
        key = category["key"]
        if key not in wanted:
            continue
        items = members[key]
        with_vec = [r for r in items if r.embedding is not None]
        if with_vec:
            matrix = np.vstack([r.embedding for r in with_vec if r.embedding is not None])
            centroid = matrix.mean(axis=0)
            closeness = matrix @ centroid
            order = sorted(
                range(len(with_vec)),
                key=lambda i: (
                    -(float(closeness[i]) * with_vec[i].confidence),
                    with_vec[i].item_id,
                ),
            )
            chosen = [with_vec[i] for i in order[:anchors]]
        else:
            chosen = sorted(items, key=lambda r: (-r.confidence, r.item_id))[:anchors]
        summary = " ".join(r.text for r in chosen)
        summary = ctx.tokens.truncate(summary, 120) if summary else ""
        counts[key] = len(items)
        rows.append(
            CategoryRow(
                scope=dict(scope),
                category_key=key,
                name=category["name"],
                description=category["description"],
                summary=summary,
                anchor_ids=[r.item_id for r in chosen],
                item_count=len(items),
                updated_at=ctx.clock(),
            )
        )
    ctx.store.upsert_categories(rows)
    return counts


def _store_intention(
    ctx: StepContext, scope: Mapping[str, str], intention: Mapping[str, Any]
) -> int:
    previous = _previous_intention(ctx, scope)
    fields = ("goals", "constraints", "progress")
    if previous and all(previous[f] == intention[f] for f in fields):
        return int(previous["version"])
    if not previous and not any(intention[f] for f in fields):
        return 0
    version = (previous["version"] if previous else 0) + 1
    ctx.store.add_intention(
        IntentionRow(
            scope=dict(scope),
            version=version,
            goals=list(intention["goals"]),
            constraints=list(intention["constraints"]),
            progress=list(intention["progress"]),
            source_item_ids=list(intention.get("source_item_ids", [])),
            created_at=ctx.clock(),
        )
    )
    return version


def persist_index(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    scope = state["scope"]
    plan = state["item_plan"]
    assignments = state.get("assignments", {})
    now = ctx.clock()
    rows = [
        ItemRow(
            item_id=n["item_id"],
            scope=dict(scope),
            resource_id=state["resource"]["resource_id"],
            text=n["text"],
            evidence=n["evidence"],
            confidence=float(n["confidence"]),
            stability=n["stability"],
            version=1,
            category_key=assignments.get(n["item_id"]),
            embedding=_vec(n["embedding"]),
            created_at=now,
            updated_at=now,
        )
        for n in plan["new"]
    ]
    merges = {m["item_id"]: m for m in plan["merged"]}
    touched = {r.category_key for r in rows if r.category_key}
    for row in ctx.store.items_by_id(list(merges)):
        merge = merges[row.item_id]
        known = {str(e) for e in row.evidence}
        row.evidence += [e for e in merge["evidence"] if str(e) not in known]
        row.confidence = round(min(0.99, max(row.confidence, merge["confidence"]) + 0.05), 3)
        row.version += 1
        row.status = "active"
        row.updated_at = now
        rows.append(row)
        if row.category_key:
            touched.add(row.category_key)
    ctx.store.upsert_items(rows)
    refresh_categories(ctx, scope, sorted(touched), int(spec.config.get("anchors", 3)))
    version = _store_intention(ctx, scope, state["intention"])
    return {
        "persisted": {
            "items_added": [n["item_id"] for n in plan["new"]],
            "items_merged": list(merges),
            "categories": sorted(touched),
            "intention_version": version,
        }
    }


# -- retrieve ----------------------------------------------------------------------------------


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
    if state.get("sufficient"):
        return {"candidates": [], "fallbacks": []}
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
    if llm.offline:
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


# -- evolve ------------------------------------------------------------------------------------


def select_targets(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    limit = int(spec.config.get("max_items", 5000))
    rows = ctx.store.items(_exact(state["scope"]), limit=limit)
    return {"targets": [r.item_id for r in rows]}


def refresh_items(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    threshold = float(spec.config.get("merge_threshold", 0.9))
    rows = [r for r in ctx.store.items_by_id(state["targets"]) if r.embedding is not None]
    superseded: list[dict[str, str]] = []
    refreshed: list[dict[str, Any]] = []
    if rows:
        matrix = np.vstack([r.embedding for r in rows if r.embedding is not None])
        order = sorted(range(len(rows)), key=lambda i: (-rows[i].confidence, rows[i].created_at))
        gone: set[int] = set()
        for position, i in enumerate(order):
            if i in gone:
                continue
            rest = [j for j in order[position + 1 :] if j not in gone]
            if not rest:
                continue
            sims = matrix[rest] @ matrix[i]
            for j, sim in zip(rest, sims, strict=True):
                if sim >= threshold:
                    gone.add(j)
                    superseded.append({"item_id": rows[j].item_id, "into": rows[i].item_id})
    for row in ctx.store.items_by_id(state["targets"]):
        stability = stability_of(row.text)
        if stability != row.stability:
            refreshed.append({"item_id": row.item_id, "from": row.stability, "to": stability})
    return {"evolve_plan": {"superseded": superseded, "refreshed": refreshed}}


def re_cluster_categories(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    gone = {s["item_id"] for s in state["evolve_plan"]["superseded"]}
    rows = [r for r in ctx.store.items_by_id(state["targets"]) if r.item_id not in gone]
    if not rows:
        return {"reassign": {}}
    dim = ctx.category_vectors().shape[1]
    vectors = np.vstack(
        [r.embedding if r.embedding is not None else np.zeros(dim, np.float32) for r in rows]
    )
    keys = _categorise(ctx, llm, [r.text for r in rows], vectors)
    return {
        "reassign": {
            r.item_id: {"from": r.category_key, "to": key}
            for r, key in zip(rows, keys, strict=True)
            if key != r.category_key
        }
    }


def adjust_intention(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    gone = {s["item_id"] for s in state["evolve_plan"]["superseded"]}
    rows = [r for r in ctx.store.items_by_id(state["targets"]) if r.item_id not in gone]
    rows.sort(key=lambda r: (r.created_at, r.item_id))
    previous = _previous_intention(ctx, state["scope"])
    intention = _intention(llm, [(r.item_id, r.text) for r in rows], None)
    intention["previous_version"] = previous["version"] if previous else 0
    intention["previous"] = previous
    return {"intention": intention}


def persist_evolution(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    scope = state["scope"]
    plan = state["evolve_plan"]
    now = ctx.clock()
    before = {c.category_key: c.item_count for c in ctx.store.categories(_exact(scope))}
    by_id = {r.item_id: r for r in ctx.store.items_by_id(state["targets"])}
    changed: dict[str, ItemRow] = {}
    for entry in plan["superseded"]:
        loser, winner = by_id[entry["item_id"]], by_id[entry["into"]]
        loser.status = "superseded"
        loser.updated_at = now
        winner.evidence = [*winner.evidence, *loser.evidence]
        winner.version += 1
        winner.updated_at = now
        changed[loser.item_id] = loser
        changed[winner.item_id] = winner
    for entry in plan["refreshed"]:
        row = by_id[entry["item_id"]]
        row.stability = entry["to"]
        changed[row.item_id] = row
    for item_id, move in state.get("reassign", {}).items():
        row = by_id[item_id]
        row.category_key = move["to"]
        row.updated_at = now
        changed[item_id] = row
    ctx.store.upsert_items(list(changed.values()))
    after = refresh_categories(ctx, scope, None, int(spec.config.get("anchors", 3)))
    version = _store_intention(ctx, scope, state["intention"])
    return {
        "persisted": {
            "items_changed": len(changed),
            "category_counts": {
                k: {"from": before.get(k, 0), "to": v}
                for k, v in after.items()
                if before.get(k, 0) != v
            },
            "intention_version": version,
        }
    }


def emit_diff(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    intention = state.get("intention", {})
    previous = intention.get("previous") or {}
    intention_diff = {
        kind: {
            "added": [t for t in intention.get(kind, []) if t not in previous.get(kind, [])],
            "removed": [t for t in previous.get(kind, []) if t not in intention.get(kind, [])],
        }
        for kind in ("goals", "constraints", "progress")
    }
    persisted = state["persisted"]
    return {
        "diff": {
            "superseded": state.get("evolve_plan", {}).get("superseded", []),
            "restabilised": state.get("evolve_plan", {}).get("refreshed", []),
            "recategorised": [
                {"item_id": k, **v} for k, v in sorted(state.get("reassign", {}).items())
            ],
            "categories": persisted.get("category_counts", {}),
            "intention": {
                "from_version": intention.get("previous_version", 0),
                "to_version": persisted.get("intention_version", 0),
                **intention_diff,
            },
        }
    }


BUILTIN_STEPS: dict[str, StepFn] = {
    fn.__name__: fn
    for fn in (
        ingest_resource,
        preprocess_multimodal,
        extract_items,
        dedupe_merge,
        categorize_items,
        infer_intention,
        persist_index,
        route_intention,
        sufficiency_check,
        route_category,
        recall_items,
        verify_rerank,
        build_context,
        select_targets,
        refresh_items,
        re_cluster_categories,
        adjust_intention,
        persist_evolution,
        emit_diff,
    )
}
