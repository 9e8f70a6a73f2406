"""The facade applications use: :class:`Memoir` (async) and :class:`MemoirSync`.

The facade is the composition root of the core: it opens the store for a URL, binds the
embedder and the token counter, and hands them to the feature services (documents, rules,
hierarchy) as one explicit :class:`~memory_core.context.CoreContext`. Adapters (CLI, MCP
server, REST) talk to this class only.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Generic, TypeVar

import structlog

from memory_core.config import DEFAULT_DB_FILENAME, Settings, load_settings
from memory_core.context import CoreContext
from memory_core.errors import EmbeddingError, InvalidInputError, MemoirError, NotFoundError
from memory_core.models import DoctorFinding, DoctorReport
from memory_core.scope import ScopeLike, as_scope
from memory_core.storage import diagnose_url, open_store, parse_database_url
from memory_core.storage.ports import Store

if TYPE_CHECKING:
    from memory_core.backup import BackupReport, RestoreReport
    from memory_core.documents.responses import ImportReport
    from memory_core.documents.service import DocumentService
    from memory_core.embed.base import Embedder
    from memory_core.hierarchy.results import IngestResult, QueryResult
    from memory_core.hierarchy.service import HierarchyService
    from memory_core.memories.service import MemoryService
    from memory_core.rules.service import RulesService
    from memory_core.tokens import TokenCounter

__all__ = [
    "Memoir",
    "MemoirSync",
    "default_database_url",
    "diagnose",
    "resolve_database_url",
]

log = structlog.get_logger(__name__)

S = TypeVar("S")


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
        store: Store = await open_store(
            parsed, settings.storage, search=settings.search, create=create
        )
        try:
            if check_embedder:
                await store.ensure_embedder(embedder.embedder_id, embedder.dimension)
        except BaseException:
            await store.close()
            raise
        log.debug("store opened", url=parsed.redacted(), backend=store.backend)
        return cls(CoreContext(settings, store, embedder, tokens))

    async def close(self) -> None:
        # Feature services holding connections of their own close first (TRANSITIONAL: the
        # hierarchy's own PostgreSQL/MySQL store, until those backends implement the ports).
        hierarchy = self.__dict__.get("hierarchy")
        if hierarchy is not None:
            await hierarchy.close()
        # Query runs are written in the background: the last ones go out before the store shuts.
        rules = self.__dict__.get("rules")
        if rules is not None:
            await rules.close()
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
        return (await self._ctx.store.stats()).as_dict()

    async def doctor(self) -> DoctorReport:
        """Every health check, each with its fix."""
        return await diagnose(self._ctx.url, self._ctx.settings, embedder=self._ctx.embedder)

    async def reembed(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """Re-embed every item with the configured embedder and rebuild the indexes.

        Returns:
            The number of items re-embedded.
        """
        await self._ctx.embedder.ensure_loaded()
        return await self._ctx.store.reembed(
            self._ctx.embedder.embed_documents,
            self._ctx.embedder.embedder_id,
            self._ctx.embedder.dimension,
            progress=progress,
        )

    # -- feature services (imported on first use: the CLI pays only for what it runs) ----------

    @functools.cached_property
    def documents(self) -> DocumentService:
        from memory_core.documents.service import DocumentService

        return DocumentService(self._ctx)

    @functools.cached_property
    def rules(self) -> RulesService:
        from memory_core.rules.service import RulesService

        return RulesService(self._ctx)

    @functools.cached_property
    def hierarchy(self) -> HierarchyService:
        from memory_core.hierarchy.service import HierarchyService

        return HierarchyService(self._ctx)

    # -- backups -------------------------------------------------------------------------------

    async def export(
        self, out: IO[str] | str | Path, *, scope: ScopeLike | None = None
    ) -> BackupReport:
        """Back up every kind of memory (of one scope, or all) as ``memoir-store/1`` JSONL to
        a stream, or to a file created owner-only (0600)."""
        from memory_core.backup import export_store, open_private

        target = None if scope is None else as_scope(scope)
        if isinstance(out, str | Path):
            with open_private(Path(out)) as handle:
                report = await export_store(self._ctx, handle, scope=target)
            report.out = str(out)
            return report
        return await export_store(self._ctx, out, scope=target)

    async def import_(
        self, source: IO[str] | Iterable[str] | str | Path, *, scope: ScopeLike | None = None
    ) -> RestoreReport | ImportReport:
        """Restore a ``memoir export`` backup (a path or a stream of lines).

        A backup of the whole store restores every row in its own scope; an older
        documents-only export (``memoir-documents/1``) is imported into ``scope``.

        Raises:
            NotFoundError: the file does not exist.
            InvalidInputError: not a memoir export, or a malformed line (named by number).
        """
        from memory_core.backup import import_store, is_store_backup

        with ExitStack() as stack:
            if isinstance(source, str | Path):
                path = Path(source)
                if not path.is_file():
                    raise NotFoundError(
                        f"no file {path}", hint="pass a file written by `memoir export`"
                    )
                lines: Iterator[str] = iter(stack.enter_context(path.open(encoding="utf-8")))
            else:
                lines = iter(source)
            try:
                first = next(lines, "")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(
                    f"{source} is not UTF-8 text", hint="pass a file written by `memoir export`"
                ) from exc
            rest = itertools.chain([first], lines)
            if is_store_backup(first):
                return await import_store(self._ctx, rest)
            if scope is None:
                raise InvalidInputError(
                    "a documents-only export needs a scope to import into",
                    hint="pass --scope (or import a backup written by this memoir's export)",
                )
            return await self.documents.import_(rest, scope=scope)

    @functools.cached_property
    def memories(self) -> MemoryService:
        """The agent's own memories (remember, recall, pin, forget, incognito…)."""
        from memory_core.memories.service import MemoryService

        return MemoryService(self._ctx)

    # memoirAI's names for the hierarchy API (Requirement 6).
    async def ingest_text(self, text: str, **kwargs: Any) -> IngestResult:
        return await self.hierarchy.ingest_text(text, **kwargs)

    async def query(self, question: str, **kwargs: Any) -> QueryResult:
        return await self.hierarchy.query(question, **kwargs)


async def diagnose(
    url: str, settings: Settings, *, embedder: Embedder | None = None
) -> DoctorReport:
    """Health checks that work even when the store cannot be opened (corrupt, missing, foreign).

    Never raises for a broken store: every problem becomes a finding with a fix.
    """
    from memory_core.embed import create_embedder

    findings: list[DoctorFinding] = []
    if embedder is None:
        try:
            embedder = create_embedder(
                settings.embedding.model, dimension=settings.embedding.dimension
            )
        except MemoirError as exc:
            findings.append(DoctorFinding("embedder", "error", exc.message, fix=exc.hint))
    findings += await diagnose_url(
        url, configured_embedder=embedder.embedder_id if embedder else None
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
    """Whether the configured models can be used here (SDK installed, key set)."""
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


# -- the blocking face -----------------------------------------------------------------------


class Blocking(Generic[S]):
    """Calls the coroutine methods of one async object through a blocking portal; other
    attributes pass through. Which objects are wrapped is declared by :class:`MemoirSync`."""

    def __init__(self, target: S, portal: Any) -> None:
        self._target = target
        self._portal = portal

    def __getattr__(self, name: str) -> Any:
        import inspect

        attr = getattr(self._target, name)
        if inspect.iscoroutinefunction(attr):

            @functools.wraps(attr)
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._portal.call(functools.partial(attr, *args, **kwargs))

            return call
        return attr


class MemoirSync(Blocking[Memoir]):
    """The synchronous face of :class:`Memoir` (same methods, blocking).

    It runs an event loop in a background thread, so it works from scripts and notebooks.
    ``documents``, ``rules``, ``hierarchy`` and ``memories`` are blocking too.
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

    @functools.cached_property
    def documents(self) -> Blocking[DocumentService]:
        return Blocking(self._target.documents, self._portal)

    @functools.cached_property
    def rules(self) -> Blocking[RulesService]:
        return Blocking(self._target.rules, self._portal)

    @functools.cached_property
    def hierarchy(self) -> Blocking[HierarchyService]:
        return Blocking(self._target.hierarchy, self._portal)

    @functools.cached_property
    def memories(self) -> Blocking[MemoryService]:
        return Blocking(self._target.memories, self._portal)

    def close(self) -> None:
        try:
            self._portal.call(self._target.close)
        finally:
            self._stack.close()

    def __enter__(self) -> MemoirSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
