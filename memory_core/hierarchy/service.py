"""The category-hierarchy API (memoirAI): ``ingest_text``, ``query``, categories and runs.

:class:`HierarchyService` is what ``Memoir.hierarchy`` returns. It wires the store for the
context's database (SQLite, PostgreSQL, MySQL), the per-step model chains (configured provider
-> the caller's ``model``, e.g. MCP sampling -> the offline model) and the pure pieces
(chunking, strategies, aggregation). The query pipeline itself lives in
:mod:`memory_core.hierarchy.query`.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio
import structlog

from memory_core.chunking import chunk_by_sentences
from memory_core.errors import CategoryMissingError, ConfigError, InvalidInputError, ModelError
from memory_core.hierarchy.batches import IngestProgress, ProgressCallback, file_digest
from memory_core.hierarchy.classify import Classifier
from memory_core.hierarchy.filing import (
    FILING_ATTEMPTS,
    file_again,
    file_offline,
    file_proposed,
    offline_tree_for,
)
from memory_core.hierarchy.limits import check_ingest_size
from memory_core.hierarchy.port_store import PortHierarchyStore
from memory_core.hierarchy.query import run_query
from memory_core.hierarchy.results import (
    CategoryNode,
    CategoryTree,
    ErrorInfo,
    IngestedChunk,
    IngestResult,
    KnowledgeRemoval,
    QueryResult,
)
from memory_core.hierarchy.store import HierarchyStore, NewChunk
from memory_core.hierarchy.stores import create_hierarchy_store
from memory_core.hierarchy.strategies import StrategyParams
from memory_core.hierarchy.streamed import ingest_stream
from memory_core.hierarchy.tree_port import tree_port_for
from memory_core.llm.category_vectors import category_vectors
from memory_core.llm.profiles import STEPS, resolve_profile
from memory_core.models import content_hash, stable_id, utc_now
from memory_core.scope import Scope, ScopeLike, as_scope

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from memory_core.context import CoreContext
    from memory_core.llm.agents import HierarchyAgents
    from memory_core.llm.offline import OfflineModel

__all__ = ["INGEST_RUN_KIND", "QUERY_RUN_KIND", "HierarchyService"]

log = structlog.get_logger(__name__)
QUERY_RUN_KIND = "hierarchy_query"
INGEST_RUN_KIND = "hierarchy_ingest"


class HierarchyService:
    """Ingest text into the category hierarchy and answer questions from it.

    Args:
        ctx: the facade's context (settings, store, embedder, token counter, URL).
        store: use this hierarchy store instead of the one for ``ctx.url`` (tests, 6b).
    """

    def __init__(self, ctx: CoreContext, *, store: HierarchyStore | None = None) -> None:
        self.ctx = ctx
        self.settings = ctx.settings.hierarchy
        self._store = store
        self._opened = False
        self._lock = anyio.Lock()
        self._offline: OfflineModel | None = None
        self._depth_checked: set[Scope] = set()  # scopes whose tree has the configured depth
        # Category centroids per scope, with the tree signature they were computed for.
        self._centroids: dict[Scope, tuple[str, dict[str, Any]]] = {}
        self.params = StrategyParams(
            wide_branch_n=self.settings.wide_branch_n,
            zoom_in_n=self.settings.zoom_in_n,
            zoom_in_n2=self.settings.zoom_in_n2,
            branch_out_n=self.settings.branch_out_n,
            branch_out_n2=self.settings.branch_out_n2,
            branch_out_max_per_level=self.settings.branch_out_max_per_level,
        )

    # -- wiring ------------------------------------------------------------------------------

    async def store(self) -> HierarchyStore:
        """The opened hierarchy store (tables created on first use).

        Raises:
            DatabaseUnavailableError: the database cannot be reached.
        """
        async with self._lock:
            if self._store is None:
                self._store = create_hierarchy_store(self.ctx)
            if not self._opened:
                await self._store.open()
                self._opened = True
        return self._store

    async def _checked_store(self, scope: Scope) -> HierarchyStore:
        """The store, once ``scope``'s tree is known to have the configured depth.

        Raises:
            ConfigError: the scope's chunks sit at another level (``hierarchy.depth`` changed
                on a filled store): names the depth to go back to, and the rebuild.
        """
        store = await self.store()
        if scope in self._depth_checked:
            return store
        port = tree_port_for(store)
        found = sorted(await port.leaf_levels(scope)) if port is not None else []
        depth = self.settings.depth
        if found and found != [depth]:
            built = ", ".join(map(str, found))
            raise ConfigError(
                f"hierarchy.depth is {depth}, but the knowledge tree of scope {scope.key!r} was "
                f"built with depth {built} (its chunks sit at level {built})",
                hint=f"set hierarchy.depth = {found[-1]} again (memoir.toml or "
                f"MEMOIR_HIERARCHY__DEPTH), or rebuild the tree at depth {depth}: "
                f"`memoir categories --recluster --scope '{scope}'`",
                details={"depth": depth, "levels": found},
            )
        self._depth_checked.add(scope)
        return store

    async def close(self) -> None:
        """Close the hierarchy store (a no-op on SQLite, where the facade owns the store)."""
        if self._store is not None and self._opened:
            await self._store.close()
            self._opened = False

    @property
    def offline(self) -> OfflineModel:
        """The built-in offline model (pydantic-ai is imported on first use: the CLI's
        ``categories`` and ``runs`` never pay for it)."""
        if self._offline is None:
            from memory_core.llm.offline import OfflineModel

            self._offline = OfflineModel(
                self.ctx.embedder,
                self.ctx.tokens,
                reuse_threshold=self.settings.offline_reuse_threshold,
            )
        return self._offline

    def agents(self, model: Model | None = None) -> HierarchyAgents:
        """The LLM steps, each on its chain: configured provider -> ``model`` -> offline."""
        from memory_core.llm.agents import HierarchyAgents
        from memory_core.llm.chain import build_step_model

        llm = self.ctx.settings.llm
        return HierarchyAgents(
            {
                step: build_step_model(
                    resolve_profile(llm, step),
                    offline=self.offline.model,
                    sampling=model,
                    use_sampling=llm.use_mcp_sampling,
                )
                for step in STEPS
            }
        )

    # -- ingest ------------------------------------------------------------------------------

    async def ingest_text(
        self,
        text: str,
        *,
        scope: ScopeLike,
        source: str | None = None,
        model: Model | None = None,
        category: str | Sequence[str] | None = None,
        progress: ProgressCallback | None = None,
    ) -> IngestResult:
        """Chunk ``text``, classify each chunk level by level, and store it under its leaf.

        Re-ingesting the same text in the same scope changes nothing and calls no model. Text
        over ``hierarchy.ingest_batch_bytes`` is streamed in batches (:meth:`ingest_file`).

        Args:
            text: the text (any length; short text is kept with a warning).
            scope: the scope to write to.
            source: where the text came from (recorded with each chunk).
            model: a pydantic-ai model to use before the offline one (e.g. MCP sampling).
            category: a category path chosen by the caller ("Databases / Indexing", or a list
                of names, broadest first): the text is filed there, existing names preferred
                (:mod:`memory_core.hierarchy.proposed`), with no model call.
            progress: awaited after each stored batch with how far the ingest is.

        Returns:
            The chunks with their category paths; ``status="error"`` with a hint when the
            models failed part way (the chunks stored so far are listed).

        Raises:
            InvalidInputError: empty text, text over ``hierarchy.max_ingest_bytes``, a bad
                scope, or an invalid ``category`` path.
            StorageError: the database failed.
        """
        started = time.perf_counter()
        scope = as_scope(scope)
        if not text or not text.strip():
            raise InvalidInputError("nothing to ingest: the text is empty", hint="pass some text")
        raw = text.encode("utf-8")
        check_ingest_size(len(raw), self.settings.max_ingest_bytes)
        if len(raw) > self.settings.ingest_batch_bytes and await self._streams():
            digest = hashlib.sha256(raw).hexdigest()
            return await self._ingest_streamed(
                io.BytesIO(raw), len(raw), digest, scope, source, model, category, progress
            )
        del raw
        settings = self.settings
        chunking = chunk_by_sentences(
            text,
            count=self.ctx.tokens.count,
            min_chars=settings.min_chunk_chars,
            max_chars=settings.max_chunk_chars,
            delimiters=settings.chunk_delimiters,
        )
        for warning in chunking.warnings:
            log.warning("chunking", detail=warning)
        store = await self._checked_store(scope)
        texts = [c.text for c in chunking.chunks]
        counts = [c.tokens for c in chunking.chunks]
        hashes = [content_hash(t) for t in texts]
        uids = [stable_id("hierarchy", scope, h) for h in hashes]
        existing: dict[str, tuple[int, int]] = {}
        if hasattr(store, "existing_chunks"):
            existing = await store.existing_chunks(scope, uids)
        todo = [i for i, uid in enumerate(uids) if uid not in existing]
        row_of = {index: row for row, index in enumerate(todo)}
        vectors = None
        if todo:
            await self.ctx.embedder.ensure_loaded()
            vectors = await self.ctx.embedder.embed_documents([texts[i] for i in todo])
            self.offline.remember([texts[i] for i in todo], vectors)
        agents = self.agents(model)
        classifier = Classifier(
            store, agents, depth=settings.depth, max_categories=settings.max_categories
        )
        base = datetime.now(UTC)
        result = IngestResult(
            scope=scope.key, source=source, warnings=list(chunking.warnings), timestamp=utc_now()
        )
        # Offline, the tree comes from the content (clusters of the chunk embeddings); with a
        # model, each chunk is classified level by level (memoirAI Requirement 2).
        placed: list[Any] | None
        if category is not None:
            placed = await file_proposed(
                store,
                settings,
                scope,
                category,
                [texts[i] for i in todo],
                vectors,
                result.warnings,
            )
        else:
            placed = await file_offline(
                store,
                agents,
                settings,
                scope,
                [texts[i] for i in todo],
                vectors,
                [counts[i] for i in todo],
            )
        paths = await self._paths_by_id(store, scope) if existing else {}
        try:
            for index, chunk in enumerate(chunking.chunks):
                uid = uids[index]
                if uid in existing:
                    item_id, category_id = existing[uid]
                    result.chunks.append(
                        self._ingested(chunk, uid, item_id, category_id, paths, counts[index], True)
                    )
                    continue
                if placed is not None:
                    where = placed[row_of[index]]
                else:
                    where = await classifier.classify(scope, chunk.text)
                row = row_of[index]
                # Offsets in microseconds keep the text's order among chunks of one category.
                created_at = (base + timedelta(microseconds=index)).isoformat(
                    timespec="microseconds"
                )
                new = NewChunk(
                    uid=uid,
                    text=chunk.text,
                    token_count=counts[index],
                    content_hash=hashes[index],
                    created_at=created_at,
                    source=source,
                    metadata={"start_offset": chunk.start, "end_offset": chunk.end},
                )
                vector = None if vectors is None else vectors[row : row + 1]
                for attempt in range(FILING_ATTEMPTS):
                    try:
                        ids = await store.add_chunks(scope, where.leaf.category_id, [new], vector)
                        break
                    except CategoryMissingError:
                        if attempt + 1 == FILING_ATTEMPTS:
                            raise
                        log.info("leaf category vanished; filing the chunk again", uid=uid)
                        where = await file_again(
                            store, agents, settings, scope, category, chunk.text, vector,
                            counts[index], classifier, result.warnings,
                        )  # fmt: skip
                paths[where.leaf.category_id] = where.path_label
                result.categories_created.extend(where.created)
                result.chunks.append(
                    self._ingested(
                        chunk, uid, ids[0], where.leaf.category_id, paths, counts[index], False
                    )
                )
        except ModelError as error:
            result.status = "error"
            result.error = ErrorInfo(
                code=error.code,
                message=error.message,
                hint=error.hint or "check the [llm] settings, or set llm.model = 'offline'",
            )
            log.error("ingest stopped", error=error.message[:300], stored=len(result.chunks))
        stats = agents.stats
        result.warnings.extend(agents.warnings())
        result.model_used = stats.models_used
        if placed:
            classifiers = list(dict.fromkeys(m for where in placed for m in where.models))
            result.model_used = {**stats.models_used, "classify": classifiers}
        result.llm_calls = sum(stats.calls.values())
        result.total_latency = round(time.perf_counter() - started, 6)
        if progress is not None:
            size = len(text.encode("utf-8"))
            await progress(IngestProgress(size, size, 1, len(result.chunks), len(todo)))
        result.run_id = await store.record_run(
            scope,
            INGEST_RUN_KIND,
            result.total_latency * 1000,
            {
                "source": source,
                "chunks": len(result.chunks),
                "new_chunks": len(todo),
                "categories_created": len(result.categories_created),
                "warnings": result.warnings,
                "status": result.status,
                "error": result.error.model_dump() if result.error else None,
                **stats.as_dict(),
                "models": {s: m.record() for s, m in agents.models.items()},
            },
        )
        return result

    @staticmethod
    def _ingested(
        chunk: Any,
        uid: str,
        item_id: int,
        category_id: int,
        paths: dict[int, str],
        tokens: int,
        already: bool,
    ) -> IngestedChunk:
        return IngestedChunk(
            chunk_id=uid,
            item_id=item_id,
            category_path=paths.get(category_id, ""),
            category_id=category_id,
            token_count=tokens,
            chars=len(chunk.text),
            start_offset=chunk.start,
            end_offset=chunk.end,
            already_stored=already,
        )

    async def ingest_file(
        self,
        path: str | Path,
        *,
        scope: ScopeLike,
        model: Model | None = None,
        category: str | Sequence[str] | None = None,
        progress: ProgressCallback | None = None,
    ) -> IngestResult:
        """Read a UTF-8 text file and ingest it (the path is the source).

        A file over ``hierarchy.ingest_batch_bytes`` is streamed: read, chunked, embedded and
        stored one batch per transaction (memory bounded by a batch); an interrupted ingest of
        the same file resumes after its last stored batch.

        Raises:
            InvalidInputError: the file is missing, over ``hierarchy.max_ingest_bytes``, or not
                UTF-8 text.
        """
        scope = as_scope(scope)
        file = Path(path).expanduser()
        try:
            size = file.stat().st_size
            check_ingest_size(size, self.settings.max_ingest_bytes, what=str(file))
            if size > self.settings.ingest_batch_bytes and await self._streams():
                with file.open("rb") as stream:
                    digest = file_digest(stream)
                    return await self._ingest_streamed(
                        stream, size, digest, scope, str(file.resolve()), model, category, progress
                    )
            text = await anyio.Path(file).read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise InvalidInputError(f"no such file: {file}", hint="check the path") from exc
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"{file} is not UTF-8 text", hint="convert it to UTF-8 text first"
            ) from exc
        except IsADirectoryError as exc:
            raise InvalidInputError(f"{file} is a directory", hint="pass a file") from exc
        return await self.ingest_text(
            text,
            scope=scope,
            source=str(file.resolve()),
            model=model,
            category=category,
            progress=progress,
        )

    async def _streams(self) -> bool:
        """Whether this store streams large inputs (the transitional MySQL hierarchy tables do
        not: there an input up to ``hierarchy.max_ingest_bytes`` is ingested in one go)."""
        return isinstance(await self.store(), PortHierarchyStore)

    async def _ingest_streamed(
        self,
        stream: BinaryIO,
        size: int,
        digest: str,
        scope: Scope,
        source: str | None,
        model: Model | None,
        category: str | Sequence[str] | None,
        progress: ProgressCallback | None,
    ) -> IngestResult:
        started = time.perf_counter()
        agents = self.agents(model)
        result = IngestResult(scope=scope.key, source=source, timestamp=utc_now())
        store = await self._checked_store(scope)
        if not isinstance(store, PortHierarchyStore):  # callers check _streams() first
            raise ConfigError(
                f"streamed ingest needs the shared store, not the {store.backend} tables",
                hint="use a SQLite or PostgreSQL store, or keep inputs under hierarchy.ingest_batch_bytes",
            )
        try:
            await ingest_stream(
                self,
                store,
                stream,
                digest=digest,
                size=size,
                scope=scope,
                source=source,
                agents=agents,
                category=category,
                progress=progress,
                result=result,
            )
        except ModelError as error:
            result.status = "error"
            result.error = ErrorInfo(
                code=error.code,
                message=error.message,
                hint=error.hint
                or "check the [llm] settings, or set llm.model = 'offline'; "
                "run the ingest again to resume after the last stored batch",
            )
        stats = agents.stats
        result.warnings.extend(agents.warnings())
        result.model_used = stats.models_used
        result.llm_calls = sum(stats.calls.values())
        result.total_latency = round(time.perf_counter() - started, 6)
        streamed = result.stream.model_dump() if result.stream is not None else {}
        result.run_id = await store.record_run(
            scope,
            INGEST_RUN_KIND,
            result.total_latency * 1000,
            {
                "source": source,
                "chunks": streamed.get("chunks", 0),
                "new_chunks": streamed.get("new_chunks", 0),
                "stream": streamed,
                "categories_created": len(result.categories_created),
                "status": result.status,
                "error": result.error.model_dump() if result.error else None,
                **stats.as_dict(),
            },
        )
        return result

    # -- removal -----------------------------------------------------------------------------

    async def forget(
        self,
        *,
        scope: ScopeLike,
        chunk_ids: Sequence[str] = (),
        source: str | None = None,
        category: str | int | None = None,
    ) -> KnowledgeRemoval:
        """Remove ingested knowledge: chunks by id (chunk id or item id), every chunk ingested
        from ``source``, or a category with its whole subtree (id or path "A / B"); the
        categories left empty go too, all in one transaction.

        Raises:
            InvalidInputError: nothing to remove was named, or the category does not exist
                (the message lists the top-level categories).
            ConfigError: the store has no removal (the transitional MySQL hierarchy tables).
        """
        scope = as_scope(scope)
        if not chunk_ids and source is None and category is None:
            raise InvalidInputError(
                "nothing to forget: no chunk id, source or category given",
                hint="pass chunk ids, source='notes.md' or category='Databases / Indexing'",
            )
        store = await self.store()
        if not isinstance(store, PortHierarchyStore):
            raise ConfigError(
                f"removing knowledge is not available on the {store.backend} hierarchy tables",
                hint="use a SQLite or PostgreSQL store, where knowledge lives on the shared store",
            )
        categories = [] if category is None else [await self._category_id(store, scope, category)]
        removed = await store.remove_chunks(
            scope, chunk_ids=list(chunk_ids), source=source, category_ids=categories
        )
        self._centroids.pop(scope, None)
        return KnowledgeRemoval(
            scope=scope.key,
            chunks=removed.chunks,
            categories=removed.categories,
            sources=removed.resources,
        )

    async def _category_id(self, store: HierarchyStore, scope: Scope, category: str | int) -> int:
        paths = await self._paths_by_id(store, scope)
        if isinstance(category, int) or str(category).isdigit():
            if int(category) in paths:
                return int(category)
        else:
            wanted = " / ".join(part.strip() for part in str(category).split("/")).casefold()
            for category_id, label in paths.items():
                if label.casefold() == wanted:
                    return category_id
        tops = sorted({label.split(" / ")[0] for label in paths.values()})[:20]
        raise InvalidInputError(
            f"no category {category!r} in scope {scope.key!r}",
            hint=f"give an id or a full path from `memoir categories` (top level: "
            f"{', '.join(tops) or 'none yet'})",
        )

    # -- query -------------------------------------------------------------------------------

    async def query(
        self,
        question: str,
        *,
        scope: ScopeLike,
        strategy: str | None = None,
        max_token_budget: int | None = None,
        summarize: bool | None = None,
        model: Model | None = None,
    ) -> QueryResult:
        """Answer ``question`` by walking the hierarchy and reading the selected leaves.

        Args:
            question: the natural-language question.
            scope: the scope to read.
            strategy: one_shot, wide_branch, zoom_in or branch_out (default: configured).
            max_token_budget: token budget for the chunks given to the final call.
            summarize: ``allow_exceed_max_token_budget_and_summarize`` for this call.
            model: a pydantic-ai model to use before the offline one (e.g. MCP sampling).

        Returns:
            The answer with used chunks, citations, dropped paths and latency; on failure
            ``status="error"`` with the remediation (nothing stored, every model failed).

        Raises:
            InvalidInputError: empty question, unknown strategy or a bad scope.
            BudgetError: a budget below 1.
            StorageError: the database failed.
        """
        scope = as_scope(scope)
        store = await self._checked_store(scope)
        agents = self.agents(model)
        budget = self.settings.max_token_budget if max_token_budget is None else max_token_budget
        if summarize is None:
            summarize = self.settings.allow_exceed_max_token_budget_and_summarize
        with category_vectors(await self._category_vectors(store, scope, agents)):
            return await run_query(
                store,
                agents,
                tokens=self.ctx.tokens,
                settings=self.settings,
                params=self.params,
                scope=scope,
                question=question,
                strategy=strategy or self.settings.strategy,
                budget=budget,
                summarize=summarize,
                run_kind=QUERY_RUN_KIND,
            )

    async def _category_vectors(
        self, store: HierarchyStore, scope: Scope, agents: HierarchyAgents
    ) -> dict[str, Any]:
        """Category centroids by traversal label, for the offline model's ``select``."""
        if not agents.models["traverse"].offline_only:
            return {}
        tree = offline_tree_for(store, self.settings)
        if tree is None:
            return {}
        signature = await tree.signature(scope)
        cached = self._centroids.get(scope)
        if cached is None or cached[0] != signature:
            cached = (signature, await tree.centroids(scope))
            self._centroids[scope] = cached
        return cached[1]

    # -- inspection --------------------------------------------------------------------------

    async def categories(self, *, scope: ScopeLike) -> CategoryTree:
        """The category tree of ``scope``: nested nodes with name, level and children."""
        scope = as_scope(scope)
        store = await self.store()
        rows = await store.all_categories(scope)
        counts: dict[int, int] | None = None  # unknown when the store cannot count
        if hasattr(store, "chunk_counts"):
            counts = await store.chunk_counts(scope)
        nodes = {
            c.category_id: CategoryNode(
                category_id=c.category_id,
                name=c.name,
                level=c.level,
                chunk_count=counts.get(c.category_id, 0)
                if counts is not None and c.level == self.settings.depth
                else None,
            )
            for c in rows
        }
        roots: list[CategoryNode] = []
        for c in rows:
            node = nodes[c.category_id]
            parent = nodes.get(c.parent_id) if c.parent_id is not None else None
            (parent.children if parent is not None else roots).append(node)
        return CategoryTree(
            scope=scope.key,
            depth=self.settings.depth,
            max_categories=self.settings.max_categories,
            total=len(rows),
            nodes=roots,
        )

    async def recluster(self, *, scope: ScopeLike) -> CategoryTree:
        """Rebuild ``scope``'s tree from its content now: every chunk is clustered again and
        the categories named from their words (names an agent or a model chose are replaced);
        from then on the tree is re-clustered as it grows.

        Raises:
            ConfigError: ``hierarchy.offline_classifier`` is ``"names"``.
        """
        scope = as_scope(scope)
        store = await self.store()
        tree = offline_tree_for(store, self.settings)
        if tree is None:
            raise ConfigError(
                "re-clustering needs the clustering classifier",
                hint='set hierarchy.offline_classifier = "clusters"',
            )
        await tree.recluster(scope)
        self._centroids.pop(scope, None)
        self._depth_checked.discard(scope)
        return await self.categories(scope=scope)

    async def runs(
        self, *, scope: ScopeLike, limit: int = 20, kind: str | None = None
    ) -> list[dict[str, Any]]:
        """The latest query (and ingest) run records of ``scope``, newest first.

        Raises:
            InvalidInputError: ``limit`` below 1 or a bad scope.
        """
        scope = as_scope(scope)
        if limit < 1:
            raise InvalidInputError(f"limit must be at least 1, got {limit}", hint="use --limit 20")
        store = await self.store()
        return await store.list_runs(scope, kind=kind, limit=min(limit, 1000))

    async def _paths_by_id(self, store: HierarchyStore, scope: Scope) -> dict[int, str]:
        rows = await store.all_categories(scope)
        by_id = {c.category_id: c for c in rows}
        labels: dict[int, str] = {}
        for c in rows:
            parts = [c.name]
            parent = by_id.get(c.parent_id) if c.parent_id is not None else None
            while parent is not None:
                parts.append(parent.name)
                parent = by_id.get(parent.parent_id) if parent.parent_id is not None else None
            labels[c.category_id] = " / ".join(reversed(parts))
        return labels
