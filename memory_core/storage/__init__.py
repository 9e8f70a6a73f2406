"""Storage: the ports every backend implements, and the one place that picks a backend.

:func:`open_store` is the composition root of storage: it turns a URL into an open
:class:`~memory_core.storage.ports.Store`, importing only the backend the URL names. Nothing
outside ``memory_core.storage`` imports a backend module (an import-linter contract).
"""

from __future__ import annotations

from memory_core.config import SearchSettings, StorageSettings
from memory_core.errors import ConfigError, MemoirError
from memory_core.models import DoctorFinding
from memory_core.scope import DEFAULT_SCOPE_SCHEMA, ScopeSchema
from memory_core.storage.ports import Store
from memory_core.storage.url import DatabaseURL, parse_database_url

__all__ = [
    "DatabaseURL",
    "Store",
    "create_store",
    "diagnose_url",
    "open_store",
    "parse_database_url",
]


def create_store(
    url: str | DatabaseURL,
    settings: StorageSettings | None = None,
    *,
    search: SearchSettings | None = None,
    scope_schema: ScopeSchema = DEFAULT_SCOPE_SCHEMA,
) -> Store:
    """An unopened store for ``url`` (call ``await store.open()``).

    Raises:
        ConfigError: the URL names a backend that cannot hold a full store.
    """
    parsed = parse_database_url(url) if isinstance(url, str) else url
    if parsed.backend == "sqlite":
        from memory_core.storage.sqlite.store import SqliteStore

        return SqliteStore(parsed, settings, search=search, scope_schema=scope_schema)
    if parsed.backend == "postgresql":
        try:
            from memory_core.storage.postgres.store import PgStore
        except ImportError as exc:  # psycopg is an extra
            raise ConfigError(
                f"PostgreSQL support is not installed ({parsed.redacted()}): {exc}",
                hint="install it with `pip install 'memoir[postgres]'`",
            ) from exc
        return PgStore(parsed, settings, search=search, scope_schema=scope_schema)
    try:
        from memory_core.storage.mysql.store import MysqlStore
    except ImportError as exc:  # PyMySQL is an extra
        raise ConfigError(
            f"MySQL/MariaDB support is not installed ({parsed.redacted()}): {exc}",
            hint="install it with `pip install 'memoir[mysql]'`",
        ) from exc
    return MysqlStore(parsed, settings, search=search, scope_schema=scope_schema)


async def open_store(
    url: str | DatabaseURL,
    settings: StorageSettings | None = None,
    *,
    search: SearchSettings | None = None,
    scope_schema: ScopeSchema = DEFAULT_SCOPE_SCHEMA,
    create: bool = True,
) -> Store:
    """:func:`create_store`, opened (schema created or migrated).

    Raises:
        ConfigError, DatabaseUnavailableError, DatabaseCorruptError, SchemaError.
    """
    store = create_store(url, settings, search=search, scope_schema=scope_schema)
    return await store.open(create=create)


async def diagnose_url(
    url: str | DatabaseURL, *, configured_embedder: str | None
) -> list[DoctorFinding]:
    """Every storage health check for the store at ``url``, each with its fix.

    Works when the store cannot be opened (corrupt, missing, foreign file): never raises for a
    broken store, every problem becomes a finding.
    """
    parsed = parse_database_url(url) if isinstance(url, str) else url
    if parsed.backend == "sqlite":
        import anyio

        from memory_core.storage.sqlite.consistency import consistency_findings
        from memory_core.storage.sqlite.driver import select_driver
        from memory_core.storage.sqlite.health import diagnose_file

        try:
            driver = select_driver()
        except MemoirError as exc:
            return [DoctorFinding("sqlite_driver", "error", exc.message, fix=exc.hint)]
        findings = [
            DoctorFinding(
                "sqlite_driver", "ok", f"SQLite {driver.sqlite_version} via {driver.source}"
            )
        ]
        path = parsed.path.resolve() if parsed.path else None
        return findings + await anyio.to_thread.run_sync(
            lambda: diagnose_file(
                path,
                driver,
                configured_embedder=configured_embedder,
                extra_checks=(consistency_findings,),
            )
        )
    try:
        store = await open_store(parsed, create=False)
    except MemoirError as exc:
        return [DoctorFinding("open", "error", exc.message, fix=exc.hint)]
    try:
        return await store.diagnose(configured_embedder=configured_embedder)
    finally:
        await store.close()
