"""The memory layer's stores (seed 004 §11): in-memory (default), SQLite and PostgreSQL +
pgvector, one port."""

from __future__ import annotations

import os
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
    MemberRow,
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
    "MemberRow",
    "ResourceRow",
    "RevisionRow",
    "RunRow",
    "ScopeFilter",
    "ScopeValues",
    "matches",
    "open_layer_store",
]

_PROVIDERS = ("memory", "sqlite", "postgres")
_VECTOR_INDEXES = {
    "memory": ("bruteforce", "none"),
    "sqlite": ("bruteforce", "none"),
    "postgres": ("pgvector", "none"),
}


def open_layer_store(
    storage_providers: Mapping[str, Any] | None,
) -> tuple[LayerStore, dict[str, Any]]:
    """The store named by ``storage_providers`` and the resolved (recorded) configuration.

    ``{"metadata_store": {"provider": "memory" | "sqlite" | "postgres", …} | LayerStore,
    "vector_index": {"provider": "bruteforce" | "pgvector" | "none"}}``. SQLite takes a
    ``path``; PostgreSQL a ``url`` (``postgresql://…``) or ``url_env``, the name of an
    environment variable holding it (so no password sits in a configuration). The vector
    index, when not given, follows the metadata store (brute force; pgvector on PostgreSQL).

    Raises:
        ConfigError: an unknown provider, a vector index the store cannot serve, SQLite
            without a path, PostgreSQL without a URL.
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
    inferred = "vector_index" not in config
    store: LayerStore
    recorded: dict[str, Any]
    if isinstance(meta_cfg, InMemoryLayerStore) or hasattr(meta_cfg, "provision"):
        store = meta_cfg
        provider = store.backend
        location = getattr(store, "location", None) or getattr(store, "path", None)
        recorded = {"provider": provider, **({"path": str(location)} if location else {})}
    else:
        provider = str(meta_cfg.get("provider", "memory"))
        if provider == "postgresql":
            provider = "postgres"
        if provider not in _PROVIDERS:
            raise ConfigError(
                f"unknown metadata_store provider {provider!r}",
                hint=f"use one of {list(_PROVIDERS)}",
            )
        store, recorded = _open(provider, meta_cfg)
    allowed = _VECTOR_INDEXES.get(provider, ("bruteforce", "none"))
    vec_provider = str(vec_cfg.get("provider", allowed[0]))
    if vec_provider not in allowed:
        raise ConfigError(
            f"vector_index provider {vec_provider!r} does not serve the {provider!r} store",
            hint=f"use one of {list(allowed)} with metadata_store {provider!r}",
        )
    store.vector_capable = vec_provider != "none"
    resolved = {
        "metadata_store": recorded,
        "vector_index": {"provider": vec_provider, "inferred": inferred},
    }
    return store, resolved


def _open(provider: str, cfg: Mapping[str, Any]) -> tuple[LayerStore, dict[str, Any]]:
    """A store of ``provider`` from its configuration, and what ``service_meta`` records of it
    (a PostgreSQL password never; an environment variable by name only)."""
    if provider == "memory":
        return InMemoryLayerStore(), {"provider": "memory"}
    if provider == "sqlite":
        path = cfg.get("path")
        if not path:
            raise ConfigError(
                "metadata_store provider 'sqlite' needs a path",
                hint='pass {"provider": "sqlite", "path": "/path/to/layer.db"}',
            )
        from memory_core.storage.layer.sqlite import SqliteLayerStore

        return SqliteLayerStore(path), {"provider": "sqlite", "path": str(path)}
    url = cfg.get("url")
    env = cfg.get("url_env")
    if env and not url:
        url = os.environ.get(str(env))
        if not url:
            raise ConfigError(
                f"metadata_store url_env names {env!r}, which is not set",
                hint=f"export {env}=postgresql://user@host:5432/dbname",
            )
    if not url:
        raise ConfigError(
            "metadata_store provider 'postgres' needs a url or url_env",
            hint='pass {"provider": "postgres", "url": "postgresql://user@host:5432/db"} '
            'or {"provider": "postgres", "url_env": "LAYER_DATABASE_URL"}',
        )
    from memory_core.storage.layer.postgres import PostgresLayerStore

    store = PostgresLayerStore(str(url))
    recorded: dict[str, Any] = {"provider": "postgres"}
    recorded.update({"url_env": str(env)} if env and not cfg.get("url") else {})
    recorded["url"] = store.location
    return store, recorded
