"""The ``meta`` table and the vector index it describes (embedder identity and dimension)."""

from __future__ import annotations

from typing import Any

from memory_core.errors import EmbedderMismatchError
from memory_core.storage.sqlite.items import VEC_TABLE, vector_table_dimension

__all__ = [
    "EMBEDDER_ID_KEY",
    "EMBEDDING_DIM_KEY",
    "create_vector_table",
    "ensure_vector_index",
    "get_meta",
    "read_meta",
    "set_meta",
]

EMBEDDER_ID_KEY = "embedder_id"
EMBEDDING_DIM_KEY = "embedding_dim"


def get_meta(conn: Any, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def read_meta(conn: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta ORDER BY key")}


def set_meta(conn: Any, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def create_vector_table(conn: Any, dimension: int) -> None:
    """(Re)create the vec0 table: scope is the partition key, kind a filterable metadata column."""
    conn.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
    conn.execute(
        f"CREATE VIRTUAL TABLE {VEC_TABLE} USING vec0("
        "item_id INTEGER PRIMARY KEY, scope TEXT PARTITION KEY, kind TEXT, "
        f"embedding float[{int(dimension)}] distance_metric=cosine)"
    )


def ensure_vector_index(conn: Any, embedder_id: str, dimension: int) -> bool:
    """Make sure the store's vectors come from ``embedder_id`` at ``dimension``.

    A new store records the embedder and creates its vector table. A store built with another
    embedder is refused: mixing vector spaces would silently ruin every semantic search.

    Returns:
        True when the index was created now.

    Raises:
        EmbedderMismatchError: the store was built with a different embedder or dimension.
    """
    stored_id = get_meta(conn, EMBEDDER_ID_KEY)
    stored_dim = get_meta(conn, EMBEDDING_DIM_KEY)
    table_dim = vector_table_dimension(conn)
    if stored_id is None and table_dim is None:
        create_vector_table(conn, dimension)
        set_meta(conn, EMBEDDER_ID_KEY, embedder_id)
        set_meta(conn, EMBEDDING_DIM_KEY, str(dimension))
        return True
    if stored_id != embedder_id or (stored_dim and int(stored_dim) != dimension):
        raise EmbedderMismatchError(
            f"this store was built with the embedder {stored_id!r} ({stored_dim} dimensions), "
            f"but memoir is configured with {embedder_id!r} ({dimension} dimensions)",
            hint=f"configure embedding.model = {stored_id!r} again, or re-embed every item with "
            f"`memoir reembed` (uses the configured embedder)",
            details={
                "stored": {"id": stored_id, "dimension": stored_dim},
                "configured": {"id": embedder_id, "dimension": dimension},
            },
        )
    return False
