"""Running category centroids: per (scope, category) the sum and count of the active members'
embeddings, kept by the stores in the transaction that writes the items (``upsert_items``), so
a memorize scores a category's anchors without reading its members.

Besides the sums, a row keeps what the incremental anchor choice needs to know it is exact
(:func:`memory_core.pipeline.layer_ops.refresh_categories`): the centroid the members were
last scored against, the best-scored members then (``reserve_ids``, the anchors first), an
upper bound on the score there of every member outside the reserve (``runner_up``), and an
upper bound on ``confidence * |embedding|`` over the members (``weight_max``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from memory_core.storage.layer.port import ItemRow

__all__ = [
    "NO_SCORE",
    "SUMS_COLUMNS",
    "SUMS_TABLE",
    "CategorySums",
    "Membership",
    "exact_sums",
    "fold_item_changes",
    "read_sums",
    "rebuild_sums",
    "sums_ddl",
    "sync_sums",
    "vector_from_blob",
    "vector_to_blob",
    "write_sums",
]

NO_SCORE = -1e300
"""``runner_up`` when no member is left out of the anchors (finite: every backend stores it)."""

Membership = tuple[str | None, bool, np.ndarray | None]
"""What an item contributes to a category: (category key, active, embedding)."""


@dataclass(frozen=True)
class CategorySums:
    """One category's running sums (float64) and the state of its last anchor scoring."""

    vector_sum: np.ndarray | None = None
    vector_count: int = 0
    member_count: int = 0
    weight_max: float = 0.0
    scored_centroid: np.ndarray | None = None
    runner_up: float = NO_SCORE
    reserve_ids: tuple[str, ...] = ()

    def centroid(self) -> np.ndarray | None:
        """The mean of the members' embeddings (None without any)."""
        if self.vector_sum is None or self.vector_count <= 0:
            return None
        mean: np.ndarray = self.vector_sum / self.vector_count
        return mean


def vector_to_blob(vector: np.ndarray | None) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype=np.float64).tobytes()


def vector_from_blob(blob: bytes | memoryview | None) -> np.ndarray | None:
    return None if blob is None else np.frombuffer(bytes(blob), dtype=np.float64).copy()


def _weight(confidence: float, embedding: np.ndarray) -> float:
    return float(confidence) * float(np.linalg.norm(np.asarray(embedding, dtype=np.float64)))


def fold_item_changes(
    current: Mapping[tuple[tuple[str, ...], str], CategorySums],
    changes: Iterable[tuple[tuple[str, ...], Membership | None, ItemRow]],
) -> dict[tuple[tuple[str, ...], str], CategorySums]:
    """The sums of every (scope key, category) that ``changes`` touch, after them.

    Args:
        current: the stored sums of those keys (a key left out has no members yet).
        changes: (scope key, what the item was before or None if new, the row written).
    """
    out: dict[tuple[tuple[str, ...], str], CategorySums] = {}

    def get(key: tuple[tuple[str, ...], str]) -> CategorySums:
        return out.get(key) or current.get(key) or CategorySums()

    for scope_key, old, row in changes:
        if old is not None and old[0] is not None and old[1]:
            key = (scope_key, old[0])
            sums = get(key)
            total, count = sums.vector_sum, sums.vector_count
            if old[2] is not None and total is not None:
                total, count = total - np.asarray(old[2], dtype=np.float64), count - 1
            out[key] = replace(
                sums,
                vector_sum=total if count > 0 else None,
                vector_count=count,
                member_count=sums.member_count - 1,
            )
        if row.category_key is not None and row.status == "active":
            key = (scope_key, row.category_key)
            sums = get(key)
            total, count, weight = sums.vector_sum, sums.vector_count, sums.weight_max
            if row.embedding is not None:
                vector = np.asarray(row.embedding, dtype=np.float64)
                total = vector.copy() if total is None else total + vector
                count += 1
                weight = max(weight, _weight(row.confidence, vector))
            out[key] = replace(
                sums,
                vector_sum=total,
                vector_count=count,
                member_count=sums.member_count + 1,
                weight_max=weight,
            )
    return out


def exact_sums(
    members: Sequence[tuple[float, np.ndarray | None]],
    scored_centroid: np.ndarray | None = None,
    runner_up: float = NO_SCORE,
    reserve_ids: Sequence[str] = (),
) -> CategorySums:
    """The sums of ``members`` ((confidence, embedding) of each active member), recomputed."""
    vectors = [np.asarray(e, dtype=np.float64) for _, e in members if e is not None]
    weights = [_weight(c, e) for c, e in members if e is not None]
    return CategorySums(
        vector_sum=np.sum(vectors, axis=0) if vectors else None,
        vector_count=len(vectors),
        member_count=len(members),
        weight_max=max(weights, default=0.0),
        scored_centroid=scored_centroid,
        runner_up=runner_up,
        reserve_ids=tuple(reserve_ids),
    )


# -- SQL (SQLite and PostgreSQL alike) ---------------------------------------------------------

SUMS_TABLE = "layer_category_sum"
SUMS_COLUMNS = (
    "category_key, vector_sum, vector_count, member_count, weight_max, scored_centroid, "
    "runner_up, reserve_ids"
)


def sums_ddl(fields: Sequence[str], *, text: str, blob: str, real: str) -> list[str]:
    """The sums table for scope ``fields``, in one backend's column types."""
    cols = ", ".join(f"{_q(f)} {text} NOT NULL" for f in fields)
    prefix = ", ".join(_q(f) for f in fields)
    return [
        f"CREATE TABLE IF NOT EXISTS {SUMS_TABLE} ({cols}, category_key {text} NOT NULL, "
        f"vector_sum {blob}, vector_count INTEGER NOT NULL, member_count INTEGER NOT NULL, "
        f"weight_max {real} NOT NULL, scored_centroid {blob}, runner_up {real} NOT NULL, "
        "reserve_ids TEXT NOT NULL)",
        f"CREATE UNIQUE INDEX IF NOT EXISTS {SUMS_TABLE}_scope_key ON {SUMS_TABLE} "
        f"({prefix}, category_key)",
    ]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_sums(
    conn: Any, fields: Sequence[str], mark: str, scope_key: Sequence[str], keys: Sequence[str]
) -> dict[str, CategorySums]:
    """The stored sums of categories ``keys`` of one scope, on ``conn`` (DB-API ``execute``)."""
    if not keys:
        return {}
    where = " AND ".join(f"{_q(f)} = {mark}" for f in fields) or "1 = 1"
    rows = conn.execute(
        f"SELECT {SUMS_COLUMNS} FROM {SUMS_TABLE} WHERE {where} "
        f"AND category_key IN ({', '.join([mark] * len(keys))})",
        [*scope_key, *keys],
    ).fetchall()
    return {
        str(r[0]): CategorySums(
            vector_sum=vector_from_blob(r[1]),
            vector_count=int(r[2]),
            member_count=int(r[3]),
            weight_max=float(r[4]),
            scored_centroid=vector_from_blob(r[5]),
            runner_up=float(r[6]),
            reserve_ids=tuple(json.loads(r[7])),
        )
        for r in rows
    }


def write_sums(
    conn: Any,
    fields: Sequence[str],
    mark: str,
    scope_key: Sequence[str],
    sums: Mapping[str, CategorySums],
) -> None:
    """Replace the sums rows of one scope's categories, on ``conn``."""
    cols = ", ".join(_q(f) for f in fields)
    prefix = f"{cols}, " if cols else ""
    statement = (
        f"INSERT INTO {SUMS_TABLE} ({prefix}{SUMS_COLUMNS}) "
        f"VALUES ({', '.join([mark] * (len(fields) + 8))}) "
        f"ON CONFLICT ({prefix}category_key) DO UPDATE SET vector_sum=excluded.vector_sum, "
        "vector_count=excluded.vector_count, member_count=excluded.member_count, "
        "weight_max=excluded.weight_max, scored_centroid=excluded.scored_centroid, "
        "runner_up=excluded.runner_up, reserve_ids=excluded.reserve_ids"
    )
    for key, row in sums.items():
        conn.execute(
            statement,
            [
                *scope_key,
                key,
                vector_to_blob(row.vector_sum),
                row.vector_count,
                row.member_count,
                float(row.weight_max),
                vector_to_blob(row.scored_centroid),
                float(row.runner_up),
                json.dumps(list(row.reserve_ids)),
            ],
        )


def sync_sums(
    conn: Any,
    fields: Sequence[str],
    mark: str,
    changes: Sequence[tuple[tuple[str, ...], Membership | None, ItemRow]],
) -> None:
    """Fold item ``changes`` into the stored sums, on ``conn`` (the items' transaction)."""
    touched: dict[tuple[str, ...], set[str]] = {}
    for scope_key, old, row in changes:
        keys = touched.setdefault(scope_key, set())
        if old is not None and old[0] is not None and old[1]:
            keys.add(old[0])
        if row.category_key is not None and row.status == "active":
            keys.add(row.category_key)
    current: dict[tuple[tuple[str, ...], str], CategorySums] = {}
    for scope_key, keys in touched.items():
        for key, stored in read_sums(conn, fields, mark, scope_key, sorted(keys)).items():
            current[(scope_key, key)] = stored
    folded = fold_item_changes(current, changes)
    by_scope: dict[tuple[str, ...], dict[str, CategorySums]] = {}
    for (scope_key, key), sums in folded.items():
        by_scope.setdefault(scope_key, {})[key] = sums
    for scope_key, rows in by_scope.items():
        write_sums(conn, fields, mark, scope_key, rows)


def rebuild_sums(
    conn: Any,
    fields: Sequence[str],
    mark: str,
    members: Iterable[tuple[tuple[str, ...], str, float, np.ndarray | None]],
) -> None:
    """Recompute every sums row from the active members ((scope key, category, confidence,
    embedding) each): the upgrade of a store created before the sums existed."""
    grouped: dict[tuple[str, ...], dict[str, list[tuple[float, np.ndarray | None]]]] = {}
    for scope_key, key, confidence, embedding in members:
        grouped.setdefault(scope_key, {}).setdefault(key, []).append((confidence, embedding))
    for scope_key, categories in grouped.items():
        write_sums(conn, fields, mark, scope_key, {k: exact_sums(m) for k, m in categories.items()})
