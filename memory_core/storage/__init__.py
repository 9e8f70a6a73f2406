"""Storage: the only package with SQL and database drivers.

``open_store`` turns a URL into an open :class:`Store` for its backend.
"""

from __future__ import annotations

from memory_core.config import StorageSettings
from memory_core.errors import ConfigError
from memory_core.storage.base import Store
from memory_core.storage.url import DatabaseURL, parse_database_url

__all__ = ["DatabaseURL", "Store", "create_store", "parse_database_url"]


def create_store(url: str | DatabaseURL, settings: StorageSettings | None = None) -> Store:
    """An unopened store for ``url`` (call ``await store.open()``).

    Raises:
        ConfigError: the URL's backend has no full store implementation.
    """
    parsed = parse_database_url(url) if isinstance(url, str) else url
    if parsed.backend == "sqlite":
        from memory_core.storage.sqlite.store import SqliteStore

        return SqliteStore(parsed, settings)
    raise ConfigError(
        f"the {parsed.backend} backend serves the category hierarchy only "
        f"({parsed.redacted()}); the full store needs SQLite",
        hint="use a sqlite:///path/to/memoir.db URL for documents, rules and memories",
    )
