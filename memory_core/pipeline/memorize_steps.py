"""The memorize pipeline's built-in steps (seed 004 §8.1): ingest, preprocess, extract,
dedupe / merge, categorise, infer intention, persist and index.
"""

from __future__ import annotations

import hashlib
import mimetypes
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from memory_core.errors import InvalidInputError
from memory_core.pipeline.contract import State, StepSpec
from memory_core.pipeline.extraction import (
    build_text,
    evidence_location,
    item_id_for,
    offline_extract,
)
from memory_core.pipeline.layer_ops import (
    categorise,
    intention_for,
    previous_intention,
    refresh_categories,
    store_intention,
)
from memory_core.pipeline.llm_calls import (
    ExtractedItems,
)
from memory_core.pipeline.preprocessing import preprocess_file
from memory_core.pipeline.step_context import LLMHandle, StepContext, as_vector, exact_filter
from memory_core.storage.layer import (
    ItemRow,
    ResourceRow,
)

__all__ = [
    "categorize_items",
    "dedupe_merge",
    "extract_items",
    "infer_intention",
    "ingest_resource",
    "persist_index",
    "preprocess_multimodal",
    "resource_hash",
]


def _mime_of(inp: Mapping[str, Any]) -> str | None:
    if inp.get("mime"):
        return str(inp["mime"])
    if inp.get("uri"):
        return mimetypes.guess_type(str(inp["uri"]))[0]
    return None


def resource_hash(inp: Mapping[str, Any], read: Callable[[str], bytes]) -> str:
    """The content hash of a resource input (messages, content, or the bytes at its URI, read
    with ``read``: :meth:`ResourceAccess.read`, which refuses what is not allowed)."""
    import json

    if inp.get("messages") is not None:
        raw = json.dumps(inp["messages"], sort_keys=True, ensure_ascii=False).encode()
    elif inp.get("content") is not None:
        raw = str(inp["content"]).encode()
    elif inp.get("uri"):
        raw = read(str(inp["uri"]))
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
        # what this process may read is its own configuration's call (resource_access.py)
        raw = ctx.resources.read(str(inp["uri"]))
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
    """Text out of a PDF, an image or a recording (:mod:`memory_core.pipeline.preprocessing`);
    what cannot run is reported in ``missing_capabilities`` and the resource stays stored."""
    resource = state["resource"]
    mime = resource.get("mime") or ""
    uri = resource.get("uri")
    done = preprocess_file(lambda: ctx.resources.read(str(uri)), mime, llm.profile) if uri else None
    if done is None:
        return {
            "text": state.get("text", ""),
            "segments": state.get("segments", []),
            "artifacts": {},
            "missing_capabilities": [],
        }
    produced: State = {
        "text": done.text,
        "segments": done.segments,
        "artifacts": done.artifacts,
        "missing_capabilities": done.missing,
    }
    if done.usage:
        produced["llm_usage"] = {**state.get("llm_usage", {}), spec.step_id: done.usage}
    return produced


def _location_at(segments: list[dict[str, Any]], offset: int) -> dict[str, Any]:
    """The page, turn or time of the segment holding ``offset`` (a quote's start)."""
    for segment in segments:
        if segment["start"] <= offset < segment["end"]:
            return evidence_location(segment)
    return {}


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
            evidence = {"resource_id": resource_id, "span": span, "quote": item.quote}
            if start >= 0:
                evidence.update(_location_at(state.get("segments", []), start))
            found.append(
                {
                    "text": item.text,
                    "evidence": [evidence],
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
    # the store does not change during this step: every nearest-item search in one read
    searched = [i for i, c in enumerate(candidates) if c["item_id"] not in existing]
    nearest: dict[int, list[tuple[str, float]]] = {}
    if searched and ctx.store.vector_capable:
        found = ctx.store.vector_search_many(exact_filter(scope), [vectors[i] for i in searched], 1)
        nearest = dict(zip(searched, found, strict=True))
    new: list[dict[str, Any]] = []
    merged: dict[str, dict[str, Any]] = {}
    accepted: list[np.ndarray] = []
    for at, (candidate, vector) in enumerate(zip(candidates, vectors, strict=True)):
        target = candidate["item_id"] if candidate["item_id"] in existing else None
        if target is None and ctx.store.vector_capable:
            hits = nearest[at]
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


def categorize_items(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    new = state["item_plan"]["new"]
    if not new:
        return {"assignments": {}}
    vectors = np.asarray([n["embedding"] for n in new], dtype=np.float32)
    keys = categorise(ctx, llm, [n["text"] for n in new], vectors)
    return {"assignments": {n["item_id"]: key for n, key in zip(new, keys, strict=True)}}


def infer_intention(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    plan = state["item_plan"]
    pairs = [(n["item_id"], n["text"]) for n in plan["new"]]
    merged_rows = ctx.store.items_by_id([m["item_id"] for m in plan["merged"]])
    pairs += [(r.item_id, r.text) for r in merged_rows]
    previous = previous_intention(ctx, state["scope"])
    intention = intention_for(llm, pairs, previous)
    intention["previous_version"] = previous["version"] if previous else 0
    return {"intention": intention}


def persist_index(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    # items, categories and intention land together or not at all (one transaction)
    return ctx.store.atomically(lambda: _persist(ctx, spec, state))


def _persist(ctx: StepContext, spec: StepSpec, state: State) -> State:
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
            embedding=as_vector(n["embedding"]),
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
    anchors = int(spec.config.get("anchors", 3))
    # incremental_centroids=False reads every member of the touched categories (as evolve
    # does): the same categories, slower; kept for comparison (bench/bench_centroids.py)
    incremental = bool(spec.config.get("incremental_centroids", True))
    refresh_categories(ctx, scope, sorted(touched), anchors, changed=rows if incremental else None)
    version = store_intention(ctx, scope, state["intention"])
    return {
        "persisted": {
            "items_added": [n["item_id"] for n in plan["new"]],
            "items_merged": list(merges),
            "categories": sorted(touched),
            "intention_version": version,
        }
    }
