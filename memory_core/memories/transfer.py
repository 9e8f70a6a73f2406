"""Lossless JSONL export and import of memories (``memoir memory export`` / ``import``).

Format ``memoir-memories/1``, one JSON object per line:

- a header: ``{"format": "memoir-memories/1", "embedder": …, "dimension": …}``;
- one ``{"type": "settings", "user", "space", "memory_enabled", "incognito_default",
  "soft_cap"}`` per space with settings;
- one ``{"type": "memory", …}`` per entry: the spec's fields (id, user, space, role, text,
  created_at, tags, source_ids, importance, pinned, manually_saved, repeat_count, simhash,
  needs_embedding, last_scores…), the supersession links (``valid_from``, ``valid_to``,
  ``superseded_by`` as an id), the whole metadata, and the embedding as base64 float32
  (``null`` without one, or with ``with_vectors=False``).

Importing a file into an empty store and exporting again gives the same bytes. Ids are kept
when the target space is the exported one (re-importing changes nothing); a different target
space derives new ids (links follow). Vectors of another embedder are dropped and the entries
queued for the backfill.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from memory_core.errors import InvalidInputError
from memory_core.kinds import MEMORY
from memory_core.memories import controls
from memory_core.memories.records import flag
from memory_core.memories.responses import ExportReport, ImportIssue, ImportReport
from memory_core.memories.spaces import MemorySpace, space_of_scope
from memory_core.models import Item, ItemUpdate, NewItem, stable_id

if TYPE_CHECKING:
    from memory_core.context import CoreContext
    from memory_core.storage.ports import Tx

__all__ = ["FORMAT", "export_memories", "import_lossless", "is_export_header"]

FORMAT = "memoir-memories/1"
_KINDS = (MEMORY,)
_PAGE = 500


def is_export_header(record: dict[str, Any]) -> bool:
    return record.get("format") == FORMAT


def _pair_of(item: Item) -> MemorySpace:
    found = space_of_scope(item.scope)
    if found is not None:
        return found
    meta = item.metadata
    return MemorySpace(str(meta.get("user", "default")), str(meta.get("space", item.scope)))


def _record(item: Item, links: dict[int, str], vector: np.ndarray | None) -> dict[str, Any]:
    meta = item.metadata
    pair = _pair_of(item)
    return {
        "type": "memory",
        "id": item.uid,
        "user": pair.user,
        "space": pair.space,
        "role": meta.get("role", "user"),
        "text": item.text,
        "created_at": item.created_at,
        "valid_from": item.valid_from,
        "valid_to": item.valid_to,
        "superseded_by": links.get(item.superseded_by) if item.superseded_by else None,
        "tags": list(item.tags),
        "source_ids": list(meta.get("source_ids", [])),
        "importance": item.importance,
        "pinned": item.pinned,
        "manually_saved": bool(meta.get("manually_saved", 0)),
        "repeat_count": item.repeat_count,
        "simhash": None if item.simhash is None else f"{item.simhash:016x}",
        "token_count": item.token_count,
        "content_hash": item.content_hash,
        "needs_embedding": bool(meta.get("needs_embedding", 0)) or vector is None,
        "last_scores": meta.get("last_scores"),
        "metadata": meta,
        "embedding": None
        if vector is None
        else base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode("ascii"),
    }


async def export_memories(
    ctx: CoreContext, out: IO[str] | str | Path, *, space: MemorySpace | None, with_vectors: bool
) -> ExportReport:
    """Write the memories of ``space`` (None: every space) to ``out``."""
    if isinstance(out, str | Path):
        path = Path(out)
        with path.open("w", encoding="utf-8") as handle:
            report = await export_memories(ctx, handle, space=space, with_vectors=with_vectors)
        report.out = str(path)
        return report
    scope = space.scope if space is not None else None
    embedder = ctx.embedder
    out.write(
        json.dumps(
            {"format": FORMAT, "embedder": embedder.embedder_id, "dimension": embedder.dimension},
            sort_keys=True,
        )
        + "\n"
    )
    exported = 0
    scopes: list[str] = []
    after: Item | None = None
    while True:

        def page(
            tx: Tx, a: Item | None = after
        ) -> tuple[list[Item], dict[int, str], dict[int, np.ndarray]]:
            items = tx.items.find(scope, kinds=_KINDS, order="id", after=a, limit=_PAGE)
            linked = {i.superseded_by for i in items if i.superseded_by}
            links = {k: v.uid for k, v in tx.items.get(sorted(linked), meta_keys=()).items()}
            vectors = tx.vectors.vectors([i.item_id for i in items]) if with_vectors else {}
            return items, links, vectors

        items, links, vectors = await ctx.store.read(page)
        for item in items:
            if item.scope not in scopes:
                scopes.append(item.scope)
            out.write(
                json.dumps(
                    _record(item, links, vectors.get(item.item_id)),
                    sort_keys=True,
                    ensure_ascii=False,
                )
                + "\n"
            )
            exported += 1
        if len(items) < _PAGE:
            break
        after = items[-1]

    def states(tx: Tx) -> list[tuple[MemorySpace, controls.SpaceState]]:
        found = []
        for key in scopes:
            pair = space_of_scope(key)
            if pair is not None and tx.meta.get(f"memory.space:{key}"):
                found.append((pair, controls.load_state(tx, pair.scope)))
        return found

    settings = await ctx.store.read(states)
    for pair, state in settings:
        out.write(
            json.dumps(
                {
                    "type": "settings",
                    **pair.as_dict(),
                    "memory_enabled": state.memory_enabled,
                    "incognito_default": state.incognito_default,
                    "soft_cap": state.soft_cap,
                },
                sort_keys=True,
            )
            + "\n"
        )
    return ExportReport(exported=exported, settings=len(settings))


def _vector(record: dict[str, Any], dimension: int) -> np.ndarray | None:
    raw = record.get("embedding")
    if not raw:
        return None
    vector = np.frombuffer(base64.b64decode(raw), dtype=np.float32)
    return vector if vector.shape[0] == dimension else None


async def import_lossless(
    ctx: CoreContext,
    header: dict[str, Any],
    records: Iterable[tuple[int, dict[str, Any]]],
    *,
    space: MemorySpace | None,
    report: ImportReport,
) -> None:
    """Restore ``type: memory`` and ``type: settings`` records of a memoir export."""
    same_embedder = (
        header.get("embedder") == ctx.embedder.embedder_id
        and header.get("dimension") == ctx.embedder.dimension
    )
    if not same_embedder:
        report.warnings.append(
            f"the file was embedded with {header.get('embedder')}; vectors are dropped and "
            "the entries queued for `memoir memory backfill`"
        )
    rows: list[tuple[NewItem, np.ndarray | None, dict[str, Any]]] = []
    uid_map: dict[str, str] = {}
    settings_rows: list[tuple[MemorySpace, dict[str, Any]]] = []
    for line, record in records:
        try:
            pair = space or MemorySpace(str(record["user"]), str(record["space"]))
            if record.get("type") == "settings":
                settings_rows.append((pair, record))
                continue
            original = MemorySpace(str(record["user"]), str(record["space"]))
            scope = pair.scope
            uid = str(record["id"])
            if scope != original.scope:
                uid = stable_id("memory", scope.key, uid)
            uid_map[str(record["id"])] = uid
            vector = _vector(record, ctx.embedder.dimension) if same_embedder else None
            metadata = dict(record.get("metadata") or {})
            metadata.update({"user": pair.user, "space": pair.space})
            if vector is None:
                metadata["needs_embedding"] = 1
            rows.append(
                (
                    NewItem(
                        uid=uid,
                        kind=MEMORY,
                        text=str(record["text"]),
                        token_count=int(
                            record.get("token_count") or ctx.tokens.count(str(record["text"]))
                        ),
                        scope=scope,
                        content_hash=str(record.get("content_hash") or ""),
                        simhash=int(record["simhash"], 16) if record.get("simhash") else None,
                        importance=float(record.get("importance", 0.5)),
                        pinned=bool(record.get("pinned", False)),
                        tags=tuple(record.get("tags") or ()),
                        created_at=str(record["created_at"]),
                        repeat_count=int(record.get("repeat_count", 0)),
                        valid_from=record.get("valid_from"),
                        metadata={
                            **metadata,
                            "manually_saved": flag(bool(record.get("manually_saved"))),
                        },
                    ),
                    vector,
                    record,
                )
            )
        except (KeyError, ValueError, TypeError, InvalidInputError) as exc:
            report.errors.append(ImportIssue(line=line, error=f"{type(exc).__name__}: {exc}"[:300]))
            report.skipped += 1

    def write(tx: Tx) -> tuple[int, int]:
        added = skipped = 0
        for item, vector, _ in rows:
            existing = tx.items.by_uid([item.uid])
            if item.uid in existing:
                skipped += 1
                continue
            tx.items.add([item], None if vector is None else vector.reshape(1, -1))
            added += 1
        new_ids = {u: i.item_id for u, i in tx.items.by_uid([r[0].uid for r in rows]).items()}
        for item, _, record in rows:
            target = uid_map.get(str(record.get("superseded_by") or ""))
            if record.get("valid_to") or target:
                tx.items.update(
                    new_ids[item.uid],
                    ItemUpdate(
                        valid_to=record.get("valid_to"), superseded_by=new_ids.get(target or "")
                    ),
                )
        for pair, record in settings_rows:
            state = controls.load_state(tx, pair.scope)
            controls.save_state(
                tx,
                pair.scope,
                controls.SpaceState(
                    memory_enabled=bool(record.get("memory_enabled", True)),
                    incognito_default=bool(record.get("incognito_default", False)),
                    soft_cap=record.get("soft_cap"),
                    sessions=state.sessions,
                    last_retention_at=state.last_retention_at,
                ),
            )
        for scope_key in sorted({r[0].scope.key for r in rows}):
            scope = next(r[0].scope for r in rows if r[0].scope.key == scope_key)
            tx.log.record_event(scope, "import", payload={"format": "memoir", "entries": added})
        return added, skipped

    added, skipped = await ctx.store.write(write)
    report.imported += added
    report.skipped += skipped
