"""The official memory server's knowledge graph on memoir's graph tables (compatibility mode).

``@modelcontextprotocol/server-memory`` keeps entities (name, entityType, observations) and
relations (from, to, relationType) in one ``memory.jsonl`` that it rewrites on every change.
Here the same nine operations run on the graph port, one transaction each, in the space's
scope:

- an entity is a graph entity of kind ``mcp_entity`` found by its exact name, with its type
  and an insertion sequence in its metadata; observations are graph observations;
- a relation is an edge between two entities; a relation may name an entity that does not
  exist (the official server allows it), which is then a hidden placeholder entity that a
  later ``create_entities`` fills in;
- each entity is also an item of kind ``memory_node`` (its name, type and observations), so
  ``search_nodes`` adds hybrid (lexical + semantic) hits after the official server's
  case-insensitive substring matches.

Same names, inputs and result shapes as the official server; entities are listed in creation
order, relations by (from, relationType, to) (the official server lists relations in insertion
order; memoir's relation table keeps no order).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memory_core.errors import NotFoundError
from memory_core.kinds import MEMORY_NODE
from memory_core.memories.records import NEEDS_EMBEDDING
from memory_core.memories.spaces import MemorySpace
from memory_core.models import Edge, Entity, ItemUpdate, NewEntity, NewItem, stable_id
from memory_core.retrieval.engine import SearchRequest

if TYPE_CHECKING:
    from memory_core.context import CoreContext
    from memory_core.memories.service import MemoryService
    from memory_core.scope import Scope
    from memory_core.storage.ports import Tx

__all__ = ["ENTITY_KIND", "OfficialGraph"]

ENTITY_KIND = "mcp_entity"
_SEARCH_EXTRA = 10
_EMBED_BATCH = 64  # queued nodes embedded per call once the model is ready


def _seq_key(scope: Scope) -> str:
    return f"memory.graph_seq:{scope.key}"


def _node_uid(scope: Scope, name: str) -> str:
    return stable_id("memory_node", scope.key, name)


def _node_text(name: str, entity_type: str, observations: Sequence[str]) -> str:
    return "\n".join([f"{name} ({entity_type})", *observations])


def _real(entity: Entity) -> bool:
    return not entity.metadata.get("placeholder")


def _entities(tx: Tx, scope: Scope) -> list[Entity]:
    found = tx.graph.find_entities(scope, kinds=[ENTITY_KIND])
    return sorted(found, key=lambda e: (int(e.metadata.get("seq", 0)), e.entity_id))


def _by_name(tx: Tx, scope: Scope, names: Sequence[str]) -> dict[str, Entity]:
    if not names:
        return {}
    found = tx.graph.find_entities(scope, kinds=[ENTITY_KIND], keys=list(dict.fromkeys(names)))
    return {e.key: e for e in found}


def _relations(tx: Tx, scope: Scope, ids: dict[int, Entity]) -> list[dict[str, str]]:
    edges = tx.graph.edges(scope)
    rows: list[dict[str, str]] = []
    for edge in edges:
        if edge.src_kind != "entity" or edge.dst_kind != "entity":
            continue
        src, dst = ids.get(edge.src_id), ids.get(edge.dst_id)
        if src is not None and dst is not None:
            rows.append({"from": src.key, "to": dst.key, "relationType": edge.rel_type})
    rows.sort(key=lambda r: (r["from"], r["relationType"], r["to"]))
    return rows


class OfficialGraph:
    """The nine operations (``memoir.memories.graph``); each takes the :class:`MemorySpace`."""

    def __init__(self, ctx: CoreContext, service: MemoryService) -> None:
        self._ctx = ctx
        self._service = service

    async def _embed(self, texts: list[str]) -> np.ndarray | None:
        if not texts or not self._ctx.embedder.is_ready():
            return None
        return await self._ctx.embedder.embed_documents(texts)

    def _sync_nodes(
        self, tx: Tx, scope: Scope, names: Sequence[str], vectors: dict[str, np.ndarray]
    ) -> None:
        """Rewrite the search items of ``names`` (deleted when the entity is gone)."""
        current = _by_name(tx, scope, names)
        observations = tx.graph.observations([e.entity_id for e in current.values()])
        uids = {name: _node_uid(scope, name) for name in names}
        stored = tx.items.by_uid(list(uids.values()))
        for name in dict.fromkeys(names):
            entity = current.get(name)
            item = stored.get(uids[name])
            if entity is None or not _real(entity):
                if item is not None:
                    tx.items.delete([item.item_id])
                continue
            texts = [t for _, t in observations.get(entity.entity_id, [])]
            text = _node_text(name, str(entity.metadata.get("entityType", "")), texts)
            vector = vectors.get(name)
            # Without a vector (the model is still loading) the node is queued: found by
            # words until _embed_queued gives it one.
            metadata = {"entity": name, "needs_embedding": 1 if vector is None else 0}
            if item is None:
                new = NewItem(
                    uid=uids[name], kind=MEMORY_NODE, text=text,
                    token_count=self._ctx.tokens.count(text), scope=scope,
                    tags=(str(entity.metadata.get("entityType", "")),),
                    metadata=metadata,
                )  # fmt: skip
                tx.items.add([new], None if vector is None else vector.reshape(1, -1))
            elif item.text != text:
                change: dict[str, Any] = {
                    "text": text,
                    "token_count": self._ctx.tokens.count(text),
                    "metadata": {**item.metadata, **metadata},
                    "vector": vector,  # None drops the vector of the old text
                }
                tx.items.update(item.item_id, ItemUpdate(**change))

    async def _embed_queued(self, scope: Scope) -> None:
        """Embed one batch of the nodes written while the model was loading.

        Without this a node created before the model was ready stayed without a vector, so
        ``search_nodes`` found it by shared words only, never by a paraphrase.
        """
        if not self._ctx.embedder.is_ready():
            return
        queued = await self._ctx.store.read(
            lambda tx: tx.items.find(
                scope, kinds=(MEMORY_NODE,), where=NEEDS_EMBEDDING, limit=_EMBED_BATCH
            )
        )
        if not queued:
            return
        vectors = await self._ctx.embedder.embed_documents([i.text for i in queued])

        def apply(tx: Tx) -> None:
            live = tx.items.get([i.item_id for i in queued])
            for item, vector in zip(queued, vectors, strict=True):
                now = live.get(item.item_id)
                if now is None or now.text != item.text:
                    continue  # deleted or rewritten meanwhile: its own write queued it again
                metadata = {**now.metadata, "needs_embedding": 0}
                tx.items.update(item.item_id, ItemUpdate(vector=vector, metadata=metadata))

        await self._ctx.store.write(apply)

    async def _node_vectors(
        self, space: MemorySpace, names: Sequence[str], texts: dict[str, str]
    ) -> dict[str, np.ndarray]:
        wanted = [n for n in dict.fromkeys(names) if n in texts]
        vectors = await self._embed([texts[n] for n in wanted])
        return {} if vectors is None else dict(zip(wanted, vectors, strict=True))

    async def create_entities(
        self, space: MemorySpace, entities: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        scope = space.scope
        texts = {
            e["name"]: _node_text(e["name"], e["entityType"], e.get("observations", []))
            for e in entities
        }
        vectors = await self._node_vectors(space, list(texts), texts)

        def apply(tx: Tx) -> list[dict[str, Any]]:
            created: list[dict[str, Any]] = []
            for entity in entities:
                name = entity["name"]
                existing = _by_name(tx, scope, [name]).get(name)
                if existing is not None and _real(existing):
                    continue
                seq = tx.meta.bump(_seq_key(scope))
                metadata = {"entityType": entity["entityType"], "seq": seq}
                if existing is None:
                    ids = tx.graph.ensure_entities(
                        scope, [NewEntity(ENTITY_KIND, name, name, metadata=metadata)]
                    )
                    entity_id = ids[(ENTITY_KIND, name)]
                else:
                    entity_id = existing.entity_id
                    tx.graph.update_entity(entity_id, metadata=metadata)
                tx.graph.add_observations(scope, entity_id, list(entity.get("observations", [])))
                created.append(
                    {"name": name, "entityType": entity["entityType"],
                     "observations": list(entity.get("observations", []))}
                )  # fmt: skip
            self._sync_nodes(tx, scope, [e["name"] for e in created], vectors)
            return created

        return await self._ctx.store.write(apply)

    async def create_relations(
        self, space: MemorySpace, relations: Sequence[dict[str, str]]
    ) -> list[dict[str, str]]:
        scope = space.scope

        def apply(tx: Tx) -> list[dict[str, str]]:
            names = [n for r in relations for n in (r["from"], r["to"])]
            known = _by_name(tx, scope, names)
            missing = [n for n in dict.fromkeys(names) if n not in known]
            if missing:
                tx.graph.ensure_entities(
                    scope,
                    [
                        NewEntity(ENTITY_KIND, n, n, metadata={"placeholder": True, "seq": 0})
                        for n in missing
                    ],
                )
                known = _by_name(tx, scope, names)
            ids = {e.entity_id: e for e in known.values()}
            existing = {
                (e.src_id, e.rel_type, e.dst_id)
                for e in tx.graph.edges(scope, sources=[("entity", i) for i in ids])
            }
            created: list[dict[str, str]] = []
            for relation in relations:
                key = (
                    known[relation["from"]].entity_id,
                    relation["relationType"],
                    known[relation["to"]].entity_id,
                )
                if key in existing:
                    continue
                existing.add(key)
                tx.graph.apply_edges(
                    scope, add=[Edge("entity", key[0], key[1], "entity", key[2])], remove=[]
                )
                created.append(dict(relation))
            return created

        return await self._ctx.store.write(apply)

    async def add_observations(
        self, space: MemorySpace, observations: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Raises NotFoundError (nothing is written) when an entity does not exist."""
        scope = space.scope

        def plan(tx: Tx) -> dict[str, str]:
            known = _by_name(tx, scope, [o["entityName"] for o in observations])
            texts: dict[str, str] = {}
            current = tx.graph.observations([e.entity_id for e in known.values()])
            for request in observations:
                entity = known.get(request["entityName"])
                if entity is None or not _real(entity):
                    continue
                obs = [t for _, t in current.get(entity.entity_id, [])]
                obs += [c for c in request["contents"] if c not in obs]
                texts[entity.key] = _node_text(
                    entity.key, str(entity.metadata.get("entityType", "")), obs
                )
            return texts

        texts = await self._ctx.store.read(plan)
        vectors = await self._node_vectors(space, list(texts), texts)

        def apply(tx: Tx) -> list[dict[str, Any]]:
            known = _by_name(tx, scope, [o["entityName"] for o in observations])
            results: list[dict[str, Any]] = []
            for request in observations:
                entity = known.get(request["entityName"])
                if entity is None or not _real(entity):
                    raise NotFoundError(f"Entity with name {request['entityName']} not found")
                current = {
                    t
                    for _, t in tx.graph.observations([entity.entity_id]).get(entity.entity_id, [])
                }
                added = [c for c in request["contents"] if c not in current]
                tx.graph.add_observations(scope, entity.entity_id, added)
                results.append({"entityName": entity.key, "addedObservations": added})
            self._sync_nodes(tx, scope, [r["entityName"] for r in results], vectors)
            return results

        return await self._ctx.store.write(apply)

    async def delete_entities(self, space: MemorySpace, names: Sequence[str]) -> None:
        scope = space.scope

        def apply(tx: Tx) -> None:
            found = _by_name(tx, scope, names)
            tx.graph.delete_entities([e.entity_id for e in found.values()])
            self._sync_nodes(tx, scope, list(found), {})

        await self._ctx.store.write(apply)

    async def delete_observations(
        self, space: MemorySpace, deletions: Sequence[dict[str, Any]]
    ) -> None:
        scope = space.scope

        def apply(tx: Tx) -> None:
            known = _by_name(tx, scope, [d["entityName"] for d in deletions])
            touched: list[str] = []
            for deletion in deletions:
                entity = known.get(deletion["entityName"])
                if entity is None:
                    continue
                doomed = set(deletion["observations"])
                rows = tx.graph.observations([entity.entity_id]).get(entity.entity_id, [])
                tx.graph.delete_observations([oid for oid, text in rows if text in doomed])
                touched.append(entity.key)
            self._sync_nodes(tx, scope, touched, {})

        await self._ctx.store.write(apply)

    async def delete_relations(
        self, space: MemorySpace, relations: Sequence[dict[str, str]]
    ) -> None:
        scope = space.scope

        def apply(tx: Tx) -> None:
            known = _by_name(tx, scope, [n for r in relations for n in (r["from"], r["to"])])
            doomed = [
                Edge(
                    "entity",
                    known[r["from"]].entity_id,
                    r["relationType"],
                    "entity",
                    known[r["to"]].entity_id,
                )
                for r in relations
                if r["from"] in known and r["to"] in known
            ]
            tx.graph.apply_edges(scope, add=[], remove=doomed)
            placeholders = [e.entity_id for e in known.values() if not _real(e)]
            orphans = tx.graph.orphans(scope, placeholders)
            if orphans:
                tx.graph.delete_entities(orphans)

        await self._ctx.store.write(apply)

    def _graph(self, tx: Tx, scope: Scope, names: Sequence[str] | None) -> dict[str, Any]:
        everything = _entities(tx, scope)
        ids = {e.entity_id: e for e in everything}
        real = [e for e in everything if _real(e)]
        if names is not None:
            wanted = set(names)
            real = [e for e in real if e.key in wanted]
        observations = tx.graph.observations([e.entity_id for e in real])
        entities = [
            {"name": e.key, "entityType": str(e.metadata.get("entityType", "")),
             "observations": [t for _, t in observations.get(e.entity_id, [])]}
            for e in real
        ]  # fmt: skip
        relations = _relations(tx, scope, ids)
        if names is not None:
            chosen = {e["name"] for e in entities}
            relations = [r for r in relations if r["from"] in chosen or r["to"] in chosen]
        return {"entities": entities, "relations": relations}

    async def read_graph(self, space: MemorySpace) -> dict[str, Any]:
        return await self._ctx.store.read(lambda tx: self._graph(tx, space.scope, None))

    async def open_nodes(self, space: MemorySpace, names: Sequence[str]) -> dict[str, Any]:
        return await self._ctx.store.read(lambda tx: self._graph(tx, space.scope, list(names)))

    async def search_nodes(self, space: MemorySpace, query: str) -> dict[str, Any]:
        """Substring matches (the official semantics) first, then hybrid-search hits."""
        scope = space.scope
        await self._embed_queued(scope)
        graph = await self.read_graph(space)
        needle = query.lower()
        matched = [
            e["name"]
            for e in graph["entities"]
            if needle in e["name"].lower()
            or needle in e["entityType"].lower()
            or any(needle in o.lower() for o in e["observations"])
        ]
        if query.strip():
            outcome = await self._ctx.engine.search(
                SearchRequest(text=query, scope=scope, kinds=(MEMORY_NODE,), k=_SEARCH_EXTRA)
            )
            items = await self._ctx.store.read(
                lambda tx: tx.items.get([h.item_id for h in outcome.hits])
            )
            for hit in outcome.hits:
                item = items.get(hit.item_id)
                name = item.metadata.get("entity") if item else None
                if isinstance(name, str) and name not in matched:
                    matched.append(name)
        order = {name: i for i, name in enumerate(matched)}
        entities = sorted(
            (e for e in graph["entities"] if e["name"] in order), key=lambda e: order[e["name"]]
        )
        chosen = set(order)
        relations = [r for r in graph["relations"] if r["from"] in chosen or r["to"] in chosen]
        return {"entities": entities, "relations": relations}

    async def load(
        self,
        space: MemorySpace,
        entities: Sequence[dict[str, Any]],
        relations: Sequence[dict[str, str]],
    ) -> None:
        """Import a parsed ``memory.jsonl`` (entities first, then relations)."""
        await self.create_entities(space, entities)
        existing = await self.open_nodes(space, [e["name"] for e in entities])
        have = {(e["name"]) for e in existing["entities"]}
        extra = [
            {"entityName": e["name"], "contents": e["observations"]}
            for e in entities
            if e["name"] in have and e["observations"]
        ]
        if extra:
            await self.add_observations(space, extra)
        await self.create_relations(space, relations)


def dumps(value: Any) -> str:
    """The official server's text content: ``JSON.stringify(result, null, 2)``."""
    return json.dumps(value, indent=2, ensure_ascii=False)
