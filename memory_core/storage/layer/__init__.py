"""The memory layer's stores (seed 004 §11): in-memory (default) and SQLite, one port."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_core.errors import ConfigError
from memory_core.storage.layer.memory import InMemoryLayerStore
from memory_core.storage.layer.port import (
    RESERVED_COLUMNS,
    CategoryRow,
    DdlMode,
    IntentionRow,
    ItemRow,
    LayerStore,
    ResourceRow,
    RevisionRow,
    RunRow,
    ScopeFilter,
    ScopeValues,
    matches,
)

__all__ = [
    "RESERVED_COLUMNS",
    "CategoryRow",
    "DdlMode",
    "InMemoryLayerStore",
    "IntentionRow",
    "ItemRow",
    "LayerStore",
    "ResourceRow",
    "RevisionRow",
    "RunRow",
    "ScopeFilter",
    "ScopeValues",
    "matches",
    "open_layer_store",
]

_PROVIDERS = ("memory", "sqlite")
_VECTOR_INDEXES = ("bruteforce", "none")


def open_layer_store(
    storage_providers: Mapping[str, Any] | None,
) -> tuple[LayerStore, dict[str, Any]]:
    """The store named by ``storage_providers`` and the resolved (recorded) configuration.

    ``{"metadata_store": {"provider": "memory" | "sqlite", "path": …} | LayerStore,
    "vector_index": {"provider": "bruteforce" | "none"}}``; the vector index, when not given,
    is inferred from the metadata store (brute force for both).

    Raises:
        ConfigError: an unknown provider, or SQLite without a path.
    """
    config = dict(storage_providers or {})
    unknown = sorted(set(config) - {"metadata_store", "vector_index"})
    if unknown:
        raise ConfigError(
            f"unknown storage_providers keys {unknown}",
            hint="use 'metadata_store' (required) and 'vector_index' (optional)",
        )
    meta_cfg = config.get("metadata_store", {"provider": "memory"})
    vec_cfg = dict(config.get("vector_index") or {})
    vec_provider = str(vec_cfg.get("provider", "bruteforce"))
    inferred = "vector_index" not in config
    if vec_provider not in _VECTOR_INDEXES:
        raise ConfigError(
            f"unknown vector_index provider {vec_provider!r}",
            hint=f"use one of {list(_VECTOR_INDEXES)} (pgvector is not built yet)",
        )
    vectors = vec_provider != "none"
    store: LayerStore
    if isinstance(meta_cfg, (InMemoryLayerStore,)) or hasattr(meta_cfg, "provision"):
        store = meta_cfg
        store.vector_capable = vectors
        provider = store.backend
        path = getattr(store, "path", None)
    else:
        provider = str(meta_cfg.get("provider", "memory"))
        path = meta_cfg.get("path")
        if provider == "memory":
            store = InMemoryLayerStore(vectors=vectors)
        elif provider == "sqlite":
            if not path:
                raise ConfigError(
                    "metadata_store provider 'sqlite' needs a path",
                    hint='pass {"provider": "sqlite", "path": "/path/to/layer.db"}',
                )
            from memory_core.storage.layer.sqlite import SqliteLayerStore

            store = SqliteLayerStore(path, vectors=vectors)
        else:
            raise ConfigError(
                f"unknown metadata_store provider {provider!r}",
                hint=f"use one of {list(_PROVIDERS)} (postgres is not built for the layer yet)",
            )
    resolved = {
        "metadata_store": {"provider": provider, **({"path": str(path)} if path else {})},
        "vector_index": {"provider": vec_provider, "inferred": inferred},
    }
    return store, resolved
