"""The memory layer on a public corpus with a known taxonomy (issue 12, "Evaluation").

    .venv/bin/python bench/layer_eval/run_eval.py [--embedder local|hash:256] [--limit N]
        [--backend memory|sqlite] [--json out.json]

Corpus: 324 two-turn customer-support conversations of the Bitext dataset (CDLA-Sharing-1.0,
``data/SOURCES.md``), 27 intents in 11 categories. The layer's taxonomy is the 11 categories,
described by the README's intent lists. 216 conversations are memorized, each in its own scope
(``org_id=bitext``, ``conversation_id=cNNN``), with the offline model; the 108 held-out customer
requests are the queries. Measured in one run:

1. **Item extraction** (no per-fact gold exists, so two proxies that can be checked):
   *request kept*: share of conversations with at least one item from the customer's turn (the
   request is what a support memory must keep); *entity kept*: of the conversations whose
   request carries a labelled entity (order id, account type, invoice id, person, city,
   country, refund amount), the share where some item's text holds it verbatim. Baseline:
   every sentence of both turns an item (no selection: the recall ceiling, at its item count).
2. **Categorisation** into the corpus taxonomy, scored against the conversation's category:
   on the items from the customer's turn, on all items, and per conversation (majority of its
   items). Baselines on the same items: the majority class; keyword overlap with the category
   name + description (stems); embedding cosine with the category text alone.
3. **Retrieval**: for each held-out request, ``service.retrieve`` across all conversation
   scopes (``conversation_id=ANY``) vs plain hybrid search (vector + lexical, RRF k=60) and the
   vector arm alone over the same stored items. A returned item is relevant when its
   conversation has the query's intent; hit@k is the share of queries with a relevant item in
   the top k, P@10 the share of relevant items among the first 10. Also reported: where
   retrieve stopped (intention / category / item layer), and retrieve with both sufficiency
   checks disabled (always descending to the items) to separate the stops from the ranking.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory_core.embed import create_embedder  # noqa: E402
from memory_core.llm.keyphrases import overlap, word_stems  # noqa: E402
from memory_core.pipeline.extraction import build_text, query_terms, sentence_spans  # noqa: E402
from memory_core.pipeline.scopes import ANY, ScopeSelector  # noqa: E402
from memory_core.pipeline.service import MemoryService  # noqa: E402
from memory_core.storage.layer import ItemRow, ScopeFilter  # noqa: E402

DATA = Path(__file__).parent / "data" / "bitext_sample.csv"
ORG = "bitext"
RRF_K = 60

# The README's "Categories and Intents" list (commit 8b6ca3d), one entry per category.
TAXONOMY_INTENTS: dict[str, list[str]] = {
    "ACCOUNT": ["create_account", "delete_account", "edit_account", "recover_password",
                "registration_problems", "switch_account"],
    "CANCELLATION_FEE": ["check_cancellation_fee"],
    "CONTACT": ["contact_customer_service", "contact_human_agent"],
    "DELIVERY": ["delivery_options", "delivery_period"],
    "FEEDBACK": ["complaint", "review"],
    "INVOICE": ["check_invoice", "get_invoice"],
    "NEWSLETTER": ["newsletter_subscription"],
    "ORDER": ["cancel_order", "change_order", "place_order", "track_order"],
    "PAYMENT": ["check_payment_methods", "payment_issue"],
    "REFUND": ["check_refund_policy", "get_refund", "track_refund"],
    "SHIPPING_ADDRESS": ["change_shipping_address", "set_up_shipping_address"],
}  # fmt: skip


class ConversationScope(BaseModel):
    org_id: str
    conversation_id: str


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    instruction: str
    response: str
    intent: str
    category: str
    entity: str | None
    split: str

    @property
    def messages(self) -> list[dict[str, str]]:
        return [
            {"role": "user", "content": self.instruction},
            {"role": "assistant", "content": self.response},
        ]


def taxonomy() -> list[dict[str, str]]:
    return [
        {
            "key": name.lower(),
            "name": name.replace("_", " ").capitalize(),
            "description": ", ".join(i.replace("_", " ") for i in intents),
        }
        for name, intents in TAXONOMY_INTENTS.items()
    ]


def load_corpus(path: Path = DATA) -> list[Conversation]:
    """The sample's rows as conversations (ids in file order; the entity as it appears in the
    request, cut at its labelled offsets)."""
    out: list[Conversation] = []
    with path.open(encoding="utf-8", newline="") as fh:
        for n, row in enumerate(csv.DictReader(fh)):
            entity = None
            if row["entity_type"] and row["start_offset"] and row["end_offset"]:
                start, end = int(row["start_offset"]), int(row["end_offset"])
                entity = row["instruction"][start:end].strip() or None
            out.append(
                Conversation(
                    conversation_id=f"c{n:03d}",
                    instruction=row["instruction"],
                    response=row["response"],
                    intent=row["intent"],
                    category=row["category"],
                    entity=entity,
                    split=row["split"],
                )
            )
    return out


def take(corpus: Sequence[Conversation], limit: int | None) -> list[Conversation]:
    """At most ``limit`` memorize and ``limit // 2`` query rows, spread over the intents."""
    if limit is None:
        return list(corpus)
    picked: list[Conversation] = []
    for split, cap in (("memorize", limit), ("query", max(1, limit // 2))):
        rows = [c for c in corpus if c.split == split]
        by_round = sorted(rows, key=lambda c: (_rank_in_intent(rows, c), c.intent))
        picked += by_round[:cap]
    return picked


def _rank_in_intent(rows: Sequence[Conversation], row: Conversation) -> int:
    same = [c.conversation_id for c in rows if c.intent == row.intent]
    return same.index(row.conversation_id)


# -- 1. extraction --------------------------------------------------------------------------


def extraction_metrics(
    convs: Sequence[Conversation], items: dict[str, list[tuple[str, int | None]]]
) -> dict[str, float]:
    """``items``: conversation id -> (item text, turn) pairs."""
    with_entity = [c for c in convs if c.entity]
    kept = sum(1 for c in convs if any(turn == 0 for _, turn in items.get(c.conversation_id, [])))
    entity_kept = sum(
        1
        for c in with_entity
        if any(c.entity and c.entity in text for text, _ in items.get(c.conversation_id, []))
    )
    count = sum(len(items.get(c.conversation_id, [])) for c in convs)
    user = sum(1 for c in convs for _, t in items.get(c.conversation_id, []) if t == 0)
    return {
        "items_per_conversation": count / max(len(convs), 1),
        "user_turn_share": user / max(count, 1),
        "request_kept": kept / max(len(convs), 1),
        "entity_kept": entity_kept / max(len(with_entity), 1),
        "entity_conversations": float(len(with_entity)),
    }


def all_sentences(conv: Conversation) -> list[tuple[str, int | None]]:
    text, segments = build_text(conv.messages)
    return [
        (text[s:e], int(seg["turn"]))
        for seg in segments
        for s, e in sentence_spans(text, int(seg["start"]), int(seg["end"]))
    ]


# -- 2. categorisation ----------------------------------------------------------------------


def keyword_label(text: str, cats: Sequence[dict[str, str]]) -> str:
    stems = set(word_stems(text))
    scores = [overlap(stems, word_stems(f"{c['name']} {c['description']}")) for c in cats]
    return cats[int(np.argmax(scores))]["key"]


def embedding_labels(
    texts: Sequence[str], cats: Sequence[dict[str, str]], embed: Callable[[list[str]], np.ndarray]
) -> list[str]:
    if not texts:
        return []
    cat_vecs = embed([f"{c['name']}. {c['description']}" for c in cats])
    sims = embed(list(texts)) @ cat_vecs.T
    return [cats[int(j)]["key"] for j in np.argmax(sims, axis=1)]


def accuracy(pairs: Sequence[tuple[str, str]]) -> float:
    return sum(1 for got, want in pairs if got == want) / max(len(pairs), 1)


# -- 3. retrieval ---------------------------------------------------------------------------


def hybrid_search(
    service: MemoryService,
    embed: Callable[[list[str]], np.ndarray],
    query: str,
    *,
    k: int,
    vector_only: bool = False,
) -> list[str]:
    """Plain hybrid search over the stored items: vector + lexical arms fused by RRF."""
    selector: ScopeFilter = {"org_id": (ORG,), "conversation_id": None}
    arms = [service.store.vector_search(selector, embed([query])[0], 50)]
    if not vector_only:
        arms.append(service.store.lexical_search(selector, query_terms(query), 50))
    fused: dict[str, float] = {}
    for hits in arms:
        for rank, (item_id, _score) in enumerate(hits):
            fused[item_id] = fused.get(item_id, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(fused, key=lambda i: (-fused[i], i))[:k]


def ranking_metrics(ranked: Sequence[Sequence[bool]]) -> dict[str, float]:
    n = max(len(ranked), 1)
    out = {f"hit@{k}": sum(1 for r in ranked if any(r[:k])) / n for k in (1, 5, 10)}
    out["P@10"] = sum(sum(r[:10]) / 10 for r in ranked) / n
    return out


# -- the run --------------------------------------------------------------------------------


def run(
    *, embedder: str = "local", limit: int | None = None, backend: str = "memory"
) -> dict[str, Any]:
    corpus = take(load_corpus(), limit)
    memorize = [c for c in corpus if c.split == "memorize"]
    queries = [c for c in corpus if c.split == "query"]
    cats = taxonomy()
    emb = create_embedder(embedder)

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(emb.embed_documents_sync(texts), dtype=np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        storage: dict[str, Any] = {"metadata_store": {"provider": "memory"}}
        if backend == "sqlite":
            storage = {"metadata_store": {"provider": "sqlite", "path": f"{tmp}/layer.db"}}
        service = MemoryService.create(
            scope_model=ConversationScope,
            categories=cats,
            storage_providers=storage,
            boundary_fields=["org_id"],
            embedder=emb,
        )
        try:
            return _measure(service, embed, memorize, queries, cats)
        finally:
            service.close()


def _measure(
    service: MemoryService,
    embed: Callable[[list[str]], np.ndarray],
    memorize: Sequence[Conversation],
    queries: Sequence[Conversation],
    cats: Sequence[dict[str, str]],
) -> dict[str, Any]:
    started = time.perf_counter()
    by_resource: dict[str, Conversation] = {}
    for conv in memorize:
        scope = {"org_id": ORG, "conversation_id": conv.conversation_id}
        result = service.memorize(scope, conversation=conv.messages)
        if result.resource_id:
            by_resource[result.resource_id] = conv
    memorize_s = time.perf_counter() - started
    rows: list[ItemRow] = service.store.items({"org_id": (ORG,), "conversation_id": None})
    conv_of = {r.item_id: by_resource[r.resource_id] for r in rows}

    def turn(row: ItemRow) -> int | None:
        turns = [e.get("turn") for e in row.evidence if isinstance(e, dict)]
        return 0 if 0 in turns else (turns[0] if turns else None)

    layer_items: dict[str, list[tuple[str, int | None]]] = {}
    for r in rows:
        layer_items.setdefault(conv_of[r.item_id].conversation_id, []).append((r.text, turn(r)))
    baseline_items = {c.conversation_id: all_sentences(c) for c in memorize}
    extraction = {
        "offline extractor": extraction_metrics(memorize, layer_items),
        "every sentence (baseline)": extraction_metrics(memorize, baseline_items),
    }

    gold = {r.item_id: conv_of[r.item_id].category.lower() for r in rows}
    user_rows = [r for r in rows if turn(r) == 0]
    majority = Counter(c.category.lower() for c in memorize).most_common(1)[0][0]
    keyword = {r.item_id: keyword_label(r.text, cats) for r in rows}
    labels = embedding_labels([r.text for r in rows], cats, embed)
    cosine = {r.item_id: label for r, label in zip(rows, labels, strict=True)}
    layer = {r.item_id: r.category_key or "" for r in rows}

    def per_conversation(pred: dict[str, str]) -> float:
        votes: dict[str, Counter[str]] = {}
        for r in rows:
            votes.setdefault(conv_of[r.item_id].conversation_id, Counter())[pred[r.item_id]] += 1
        pairs = [
            (votes[c.conversation_id].most_common(1)[0][0], c.category.lower())
            for c in memorize
            if c.conversation_id in votes
        ]
        return accuracy(pairs)

    categorisation = {}
    for name, pred in (
        ("layer (offline categorise)", layer),
        ("majority class (baseline)", dict.fromkeys(gold, majority)),
        ("keyword overlap (baseline)", keyword),
        ("embedding cosine (baseline)", cosine),
    ):
        categorisation[name] = {
            "user-turn items": accuracy([(pred[r.item_id], gold[r.item_id]) for r in user_rows]),
            "all items": accuracy([(pred[r.item_id], gold[r.item_id]) for r in rows]),
            "conversations": per_conversation(pred),
        }

    selector = ScopeSelector(org_id=ORG, conversation_id=ANY)
    relevant: dict[str, list[list[bool]]] = {"retrieve": [], "hybrid": [], "vector": []}
    layers: Counter[str] = Counter()
    tokens: list[int] = []
    for query in queries:
        result = service.retrieve(selector, query.instruction, keep=10)
        layers[result.layer] += 1
        tokens.append(result.tokens)
        relevant["retrieve"].append(
            [conv_of[i["item_id"]].intent == query.intent for i in result.items]
        )
        for arm in ("hybrid", "vector"):
            ids = hybrid_search(
                service, embed, query.instruction, k=10, vector_only=arm == "vector"
            )
            relevant[arm].append([conv_of[i].intent == query.intent for i in ids])
    # the same pipeline with both sufficiency checks disabled: always down to the items
    service.disable("sufficiency_intention")
    service.disable("sufficiency_category")
    relevant["descend"] = [
        [
            conv_of[i["item_id"]].intent == query.intent
            for i in service.retrieve(selector, query.instruction, keep=10).items
        ]
        for query in queries
    ]
    retrieval = {
        "retrieve (intention > category > item)": ranking_metrics(relevant["retrieve"]),
        "retrieve, sufficiency disabled": ranking_metrics(relevant["descend"]),
        "hybrid vector+lexical RRF (baseline)": ranking_metrics(relevant["hybrid"]),
        "vector only (baseline)": ranking_metrics(relevant["vector"]),
    }
    return {
        "conversations": len(memorize),
        "queries": len(queries),
        "items": len(rows),
        "memorize_s": round(memorize_s, 2),
        "extraction": extraction,
        "categorisation": categorisation,
        "retrieval": retrieval,
        "retrieve_layers": dict(layers),
        "retrieve_mean_tokens": sum(tokens) / max(len(tokens), 1),
    }


def table(title: str, rows: dict[str, dict[str, float]]) -> str:
    cols = list(next(iter(rows.values())))
    width = max(len(n) for n in rows) + 2
    lines = [title, " " * width + "".join(f"{c:>24}" for c in cols)]
    for name, values in rows.items():
        cells = "".join(
            f"{values[c]:>24.0f}" if c == "entity_conversations" else f"{values[c]:>24.3f}"
            for c in cols
        )
        lines.append(f"{name:<{width}}{cells}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--backend", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--limit", type=int, default=None, help="memorize at most N rows")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    out = run(embedder=args.embedder, limit=args.limit, backend=args.backend)
    print(
        f"Bitext customer support (CDLA-Sharing-1.0): {out['conversations']} conversations "
        f"memorized -> {out['items']} items in {out['memorize_s']} s; {out['queries']} queries; "
        f"embedder {args.embedder}, backend {args.backend}\n"
    )
    print(table("Item extraction", out["extraction"]) + "\n")
    print(table("Categorisation accuracy (11 categories)", out["categorisation"]) + "\n")
    print(table("Retrieval (relevant = same intent, 27 intents)", out["retrieval"]))
    print(
        f"retrieve stopped at: {out['retrieve_layers']}; "
        f"mean context tokens {out['retrieve_mean_tokens']:.0f}"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
