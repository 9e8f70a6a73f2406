"""The evolve pipeline's built-in steps (seed 004 §6.1): select targets, refresh / dedupe
items, re-cluster categories, adjust intention, persist, emit the diff.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memory_core.pipeline.contract import State, StepSpec
from memory_core.pipeline.extraction import (
    stability_of,
)
from memory_core.pipeline.layer_ops import (
    categorise,
    intention_for,
    previous_intention,
    refresh_categories,
    store_intention,
)
from memory_core.pipeline.step_context import LLMHandle, StepContext, exact_filter
from memory_core.storage.layer import (
    ItemRow,
)
from memory_core.storage.layer import vectors as vector_math

__all__ = [
    "adjust_intention",
    "emit_diff",
    "persist_evolution",
    "re_cluster_categories",
    "refresh_items",
    "select_targets",
]


def select_targets(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    limit = int(spec.config.get("max_items", 5000))
    rows = ctx.store.items(exact_filter(state["scope"]), limit=limit)
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
            sims = vector_math.inner_products(matrix[rest], matrix[i])
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
    keys = categorise(ctx, llm, [r.text for r in rows], vectors)
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
    previous = previous_intention(ctx, state["scope"])
    intention = intention_for(llm, [(r.item_id, r.text) for r in rows], None)
    intention["previous_version"] = previous["version"] if previous else 0
    intention["previous"] = previous
    return {"intention": intention}


def persist_evolution(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    # the item changes and the category recompute land together: the running centroid sums
    # (and what a later memorize rescores) never see one without the other
    return ctx.store.atomically(lambda: _persist_evolution(ctx, spec, state))


def _persist_evolution(ctx: StepContext, spec: StepSpec, state: State) -> State:
    scope = state["scope"]
    plan = state["evolve_plan"]
    now = ctx.clock()
    before = {c.category_key: c.item_count for c in ctx.store.categories(exact_filter(scope))}
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
    version = store_intention(ctx, scope, state["intention"])
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
