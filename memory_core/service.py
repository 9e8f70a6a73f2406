"""The facade applications use: :class:`Memoir` (async) and :class:`MemoirSync`.

The facade owns the open store, the embedder and the token counter, and hands them to the
feature services (documents, rules, hierarchy) as one explicit :class:`CoreContext`. Adapters
(CLI, MCP server, REST) talk to this class only.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from memory_core.config import DEFAULT_DB_FILENAME, Settings, load_settings
from memory_core.errors import ConfigError, EmbeddingError, MemoirError
from memory_core.models import DoctorFinding, DoctorReport
from memory_core.storage import Store, create_store, parse_database_url

if TYPE_CHECKING:
    from memory_core.embed import Embedder
    from memory_core.tokens import TokenCounter

__all__ = [
    "CoreContext",
    "Memoir",
    "MemoirSync",
    "default_database_url",
    "diagnose",
    "resolve_database_url",
]

log = structlog.get_logger(__name__)


def default_database_url() -> str:
    """The per-user store used when nothing names one (platform conventions)."""
    import platformdirs

    return "sqlite:///" + str(
        Path(platformdirs.user_data_dir("memoir", appauthor=False)) / DEFAULT_DB_FILENAME
    )


def resolve_database_url(settings: Settings, explicit: str | None = None) -> str:
    """Where the store is: ``--db`` > ``MEMOIR_DATABASE_URL`` > nearest ``memoir.toml`` > user dir.

    A ``memoir.toml`` without a ``database_url`` means the ``memoir.db`` beside it.
    """
    if explicit:
        return explicit
    if settings.database_url:
        return settings.database_url
    if settings.config_file:
        return "sqlite:///" + str(Path(settings.config_file).parent.resolve() / DEFAULT_DB_FILENAME)
    return default_database_url()


@dataclass
class CoreContext:
    """Everything a feature service needs, passed explicitly (no module-level singletons)."""

    settings: Settings
    store: Any  # the SqliteStore; None when the URL is PostgreSQL / MySQL (hierarchy only)
    embedder: Embedder
    tokens: TokenCounter
    url: str
    extras: dict[str, Any] = field(default_factory=dict)

    async def embed_texts(self, texts: list[str]) -> np.ndarray:
        return await self.embedder.embed_documents(texts)


class Memoir:
    """An open memoir store with its models.

    Use ``async with await Memoir.open(url) as memoir:`` or call :meth:`close`.
    """

    def __init__(self, ctx: CoreContext) -> None:
        self._ctx = ctx

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        tokens: TokenCounter | None = None,
        create: bool = True,
        check_embedder: bool = True,
    ) -> Memoir:
        """Open (creating if needed) the store at ``url`` and bind the configured models.

        The embedding model itself is not loaded here (that is deferred until first use or
        :meth:`warm_up`), so opening is fast.

        Raises:
            DatabaseUnavailableError, DatabaseCorruptError, SchemaError: the store cannot be used.
            EmbedderMismatchError: the store was built with another embedder (see ``reembed``).
        """
        from memory_core.embed import create_embedder
        from memory_core.tokens import create_token_counter

        settings = settings or load_settings()
        resolved = resolve_database_url(settings, url)
        parsed = parse_database_url(resolved)
        embedder = embedder or create_embedder(
            settings.embedding.model, dimension=settings.embedding.dimension
        )
        tokens = tokens or create_token_counter(settings.tokenizer)
        if parsed.backend != "sqlite":
            # PostgreSQL / MySQL serve the category hierarchy, which opens its own connection
            # from ctx.url; the document, rules and memory features need the SQLite store.
            log.debug("opened without a SQLite store", url=parsed.redacted())
            return cls(CoreContext(settings, None, embedder, tokens, resolved))
        store = create_store(parsed, settings.storage)
        await store.open(create=create)
        try:
            if check_embedder:
                await store.ensure_embedder(embedder.embedder_id, embedder.dimension)
        except BaseException:
            await store.close()
            raise
        log.debug("store opened", url=parsed.redacted())
        return cls(CoreContext(settings, store, embedder, tokens, resolved))

    async def close(self) -> None:
        # Feature services that hold their own connections (the hierarchy on PostgreSQL/MySQL)
        # are closed first; a service that was never used was never created.
        hierarchy = self.__dict__.get("hierarchy")
        if hierarchy is not None and hasattr(hierarchy, "close"):
            await hierarchy.close()
        if self._ctx.store is not None:
            await self._ctx.store.close()

    async def __aenter__(self) -> Memoir:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- shared parts ----------------------------------------------------------------------

    @property
    def context(self) -> CoreContext:
        return self._ctx

    @property
    def settings(self) -> Settings:
        return self._ctx.settings

    @property
    def store(self) -> Store:
        return self._require_store()

    def _require_store(self) -> Any:
        if self._ctx.store is None:
            raise ConfigError(
                f"{parse_database_url(self._ctx.url).backend} stores serve the category hierarchy "
                "only (ingest / ask / categories)",
                hint="use a sqlite:///path URL for documents, rules, stats and re-embedding",
            )
        return self._ctx.store

    @property
    def embedder(self) -> Embedder:
        return self._ctx.embedder

    @property
    def tokens(self) -> TokenCounter:
        return self._ctx.tokens

    def warm_up(self) -> None:
        """Start loading the embedding model in the background (servers call this at start)."""
        self._ctx.embedder.start_loading()

    # -- maintenance -------------------------------------------------------------------------

    async def stats(self) -> dict[str, Any]:
        """Counts, sizes, embedder and library versions of the store."""
        return (await self._require_store().stats()).as_dict()

    async def doctor(self) -> DoctorReport:
        """Every health check, each with its fix."""
        return await diagnose(self._ctx.url, self._ctx.settings, embedder=self._ctx.embedder)

    async def reembed(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """Re-embed every item with the configured embedder and rebuild the indexes.

        Returns:
            The number of items re-embedded.
        """
        store = self._require_store()
        await self._ctx.embedder.ensure_loaded()
        return await store.reembed(
            self._ctx.embedder.embed_documents,
            self._ctx.embedder.embedder_id,
            self._ctx.embedder.dimension,
            progress=progress,
        )

    # -- feature services (imported on first use: the CLI pays only for what it runs) ----------

    @functools.cached_property
    def documents(self) -> Any:
        from memory_core.documents.service import DocumentService

        return DocumentService(self._ctx)

    @functools.cached_property
    def rules(self) -> Any:
        from memory_core.rules.service import RulesService

        return RulesService(self._ctx)

    @functools.cached_property
    def hierarchy(self) -> Any:
        from memory_core.hierarchy.service import HierarchyService

        return HierarchyService(self._ctx)

    # memoirAI's names for the hierarchy API (Requirement 6).
    async def ingest_text(self, text: str, **kwargs: Any) -> Any:
        return await self.hierarchy.ingest_text(text, **kwargs)

    async def query(self, question: str, **kwargs: Any) -> Any:
        return await self.hierarchy.query(question, **kwargs)


async def diagnose(
    url: str, settings: Settings, *, embedder: Embedder | None = None
) -> DoctorReport:
    """Health checks that work even when the store cannot be opened (corrupt, missing, foreign).

    Never raises for a broken store: every problem becomes a finding with a fix.
    """
    from memory_core.embed import create_embedder
    from memory_core.storage.sqlite.driver import select_driver
    from memory_core.storage.sqlite.health import diagnose_file

    findings: list[DoctorFinding] = []
    parsed = parse_database_url(url)
    if embedder is None:
        try:
            embedder = create_embedder(
                settings.embedding.model, dimension=settings.embedding.dimension
            )
        except MemoirError as exc:
            findings.append(DoctorFinding("embedder", "error", exc.message, fix=exc.hint))
    if parsed.backend == "sqlite":
        try:
            driver = select_driver()
        except MemoirError as exc:
            return DoctorReport(
                [DoctorFinding("sqlite_driver", "error", exc.message, fix=exc.hint)]
            )
        findings.append(
            DoctorFinding(
                "sqlite_driver", "ok", f"SQLite {driver.sqlite_version} via {driver.source}"
            )
        )
        import anyio

        findings += await anyio.to_thread.run_sync(
            lambda: diagnose_file(
                parsed.path.resolve() if parsed.path else None,
                driver,
                configured_embedder=embedder.embedder_id if embedder else None,
                extra_checks=(_document_checks,),
            )
        )
    findings += _llm_findings(settings)
    if embedder is not None:
        try:
            await embedder.ensure_loaded()
            probe = await embedder.embed_query("memoir doctor probe")
            findings.append(
                DoctorFinding(
                    "embedder",
                    "ok",
                    f"{embedder.embedder_id} loads offline ({probe.shape[0]} dims)",
                )
            )
        except (MemoirError, EmbeddingError) as exc:
            findings.append(DoctorFinding("embedder", "error", exc.message, fix=exc.hint))
    return DoctorReport(findings)


def _llm_findings(settings: Settings) -> list[DoctorFinding]:
    from memory_core.llm.availability import llm_problems

    if settings.llm.model == "offline" and not settings.llm.profiles:
        return [DoctorFinding("llm", "ok", "the built-in offline model (no key needed)")]
    problems = llm_problems(settings.llm)
    if not problems:
        return [DoctorFinding("llm", "ok", f"{settings.llm.model} can be used")]
    return [
        DoctorFinding(
            "llm", "error", f"{p.model} cannot be used: {p.reason} ({', '.join(steps)})", p.hint
        )
        for p, steps in problems
    ]


def _document_checks(conn: Any) -> list[DoctorFinding]:
    from memory_core.documents.maintenance import findings_from_counts
    from memory_core.storage.sqlite.documents import document_findings

    return findings_from_counts(document_findings(conn))


class _SyncProxy:
    """Calls an async object's coroutine methods through a blocking portal."""

    def __init__(self, target: Any, portal: Any) -> None:
        self._target = target
        self._portal = portal

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if inspect.iscoroutinefunction(attr):

            @functools.wraps(attr)
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._portal.call(functools.partial(attr, *args, **kwargs))

            return call
        if _is_service(attr):
            return _SyncProxy(attr, self._portal)
        return attr


def _is_service(value: Any) -> bool:
    return type(value).__name__.endswith("Service")


class MemoirSync(_SyncProxy):
    """The synchronous face of :class:`Memoir` (same methods, blocking).

    It runs an event loop in a background thread, so it works from scripts and notebooks.
    """

    def __init__(self, url: str | None = None, **kwargs: Any) -> None:
        from anyio.from_thread import start_blocking_portal

        self._stack = ExitStack()
        portal = self._stack.enter_context(start_blocking_portal(backend="asyncio"))
        try:
            memoir = portal.call(functools.partial(Memoir.open, url, **kwargs))
        except BaseException:
            self._stack.close()
            raise
        super().__init__(memoir, portal)

    def close(self) -> None:
        try:
            self._portal.call(self._target.close)
        finally:
            self._stack.close()

    def __enter__(self) -> MemoirSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
