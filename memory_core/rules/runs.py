"""The record of each ``query_directives`` call in the ``run`` table (DESIGN §6, Req 12.1–12.2).

A run holds what explains a query after the fact: the sanitised task (first 100 characters,
control characters escaped, secrets redacted), the detected context, the retrieval counts,
the top five scores, the budget and the tokens used, the warnings and the latency. Never
document text: directives are named by id only.

Recording must not slow the query: the service builds the payload after the answer is ready
and hands it to a :class:`RunRecorder`, which queues it and writes the queue in the
background (one small transaction for every run queued meanwhile); the query does not wait
for the writer. Waiting for it cost the query one hop to the writer thread and back, a few
milliseconds on a loaded machine (docs/benchmarks-seam.md). A busy writer (an ingest in
progress) delays the record, not the answer; listing the runs and closing the service write
whatever is still queued.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import Any

import anyio
import structlog

from memory_core.errors import MemoirError
from memory_core.rules.log_safety import sanitize_for_log
from memory_core.rules.models import DirectiveQueryResult, QueryRun
from memory_core.rules.persistence import QUERY_RUN_KIND, record_query_run
from memory_core.scope import Scope
from memory_core.storage.ports import Store, Tx

__all__ = ["RunRecorder", "query_run_payload"]

# Outside asyncio (no background task to write from): how long a query waits for its run to
# be written before leaving it queued.
RECORD_WAIT_S = 0.2
# A background write waits this long first, so the runs of the queries that follow go out in
# the same transaction: one hop to the writer thread and one commit for several runs.
RECORD_BATCH_S = 0.1
# Runs queued while the writer is busy; beyond this the oldest are dropped (and logged).
MAX_QUEUED = 1000


def _log() -> Any:
    return structlog.get_logger(__name__)


def query_run_payload(
    task: str,
    result: DirectiveQueryResult,
    *,
    top_scores: Sequence[tuple[str, float]],
    max_items: int,
    strict_layer: bool,
    include_breadcrumbs: bool,
) -> dict[str, Any]:
    """The JSON payload of one query run (pure; no document text).

    Args:
        task: the validated task text (sanitised here).
        result: the query's answer (only its diagnostics and directive ids are read).
        top_scores: (directive id, total score) of the best five ranked candidates.
        max_items: the item limit applied.
        strict_layer: whether other layers were excluded.
        include_breadcrumbs: whether breadcrumbs were requested.
    """
    d = result.diagnostics
    stats = d.retrieval_stats
    return {
        "task": sanitize_for_log(task),
        "task_chars": len(task),
        "detected_layer": d.detected_layer,
        "layer_candidates": [
            {"layer": c.layer, "confidence": c.confidence} for c in d.layer_candidates[:3]
        ],
        "topics": list(d.topics),
        "technologies": [*d.languages, *d.frameworks, *d.platforms],
        "confidence": d.confidence,
        "mode": d.mode,
        "strict_layer": strict_layer,
        "include_breadcrumbs": include_breadcrumbs,
        "max_items": max_items,
        "searched": stats.searched,
        "considered": stats.considered,
        "selected": stats.selected,
        "lexical_hits": stats.lexical_hits,
        "semantic_hits": stats.semantic_hits,
        "graph_hits": stats.graph_hits,
        "dropped_for_budget": stats.dropped_for_budget,
        "top_scores": [
            {"directive_id": uid, "score": round(score, 3)} for uid, score in top_scores[:5]
        ],
        "selected_ids": [r.directive_id for r in result.directives],
        "token_budget": d.token_budget,
        "tokens_used": d.tokens_used,
        "forced_must": d.forced_must,
        "semantic_available": d.semantic_available,
        # Warnings may quote user input (an unknown mode slug): sanitised like the task.
        "warnings": [sanitize_for_log(w, limit=300) for w in d.warnings],
    }


class RunRecorder:
    """Writes query runs to the store without holding up the query that produced them.

    Args:
        store: the store the runs are written to (its ``log`` port).
        wait_s: outside asyncio, how long :meth:`record` waits for the write before leaving
            it queued (under asyncio it never waits: the queue is written by a background task).
    """

    def __init__(
        self, store: Store, *, wait_s: float = RECORD_WAIT_S, batch_s: float = RECORD_BATCH_S
    ) -> None:
        self._store = store
        self._wait_s = wait_s
        self._batch_s = batch_s
        # Appended on the event loop, drained in the writer's thread: deque operations are
        # atomic, so a drain that runs late (after its caller gave up waiting) writes each
        # queued run exactly once.
        self._queue: deque[tuple[Scope, str, float, dict[str, Any]]] = deque(maxlen=MAX_QUEUED)
        self._flushing = anyio.Lock()
        # The task writing the queue in the background (kept here: the loop holds tasks weakly),
        # and the event that ends its wait for more runs (set by close).
        self._writing: asyncio.Task[None] | None = None
        self._write_now: anyio.Event | None = None

    @property
    def queued(self) -> int:
        """Runs not written yet."""
        return len(self._queue)

    async def record(
        self, scope: Scope, started_at: str, took_ms: float, payload: dict[str, Any]
    ) -> None:
        """Queue one run and have the queue written in the background (never raises).

        Under asyncio this returns at once: a background task writes the queue, and
        :meth:`list` and :meth:`close` write what is still queued. Elsewhere it waits up to
        ``wait_s`` for the write, then leaves the run queued.

        Args:
            scope: the scope queried.
            started_at: when the query started (RFC 3339 UTC).
            took_ms: the query's wall time.
            payload: from :func:`query_run_payload`.
        """
        if len(self._queue) == self._queue.maxlen:
            _log().warning("query run dropped: too many runs queued", queued=len(self._queue))
        self._queue.append((scope, started_at, took_ms, payload))
        if self._writing is not None and not self._writing.done():
            return  # the running task writes this run too (it drains until the queue is empty)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another event loop (trio): no task to hand it to
            with anyio.move_on_after(self._wait_s):
                await self.flush()
            return
        self._write_now = anyio.Event()
        self._writing = loop.create_task(self._write_queue(self._write_now))

    async def _write_queue(self, now: anyio.Event) -> None:
        with anyio.move_on_after(self._batch_s):
            await now.wait()
        # Runs queued while a write is under way go out in the next one; a failed write
        # (logged by flush) leaves the rest queued for the next record, list or close.
        while self._queue and await self.flush():
            pass

    async def close(self) -> None:
        """Wait for the background write, then write whatever is still queued."""
        if self._writing is not None:
            assert self._write_now is not None
            self._write_now.set()
            await self._writing
            self._writing = None
        await self.flush()

    async def flush(self) -> bool:
        """Write every queued run in one transaction (errors are logged, not raised).

        Returns:
            False when the write failed (the runs it held are lost), else True.
        """
        # One flush at a time: concurrent queries ending together find their runs already
        # written by the flush they waited for, instead of each committing an empty write.
        async with self._flushing:
            if not self._queue:
                return True
            try:
                queue = self._queue
                written = await self._store.write(lambda tx: _drain(tx, queue))
            except MemoirError as error:
                # The answer matters more than its record: report and carry on.
                _log().warning("query run not recorded", error=error.message)
                return False
        if written > 1:
            _log().debug("query runs recorded", count=written)
        return True

    async def list(self, scope: Scope, limit: int) -> list[QueryRun]:
        """The newest runs of ``scope`` (queued ones are written first), newest first."""
        await self.flush()
        rows = await self._store.read(
            lambda tx: tx.log.runs(scope, kinds=(QUERY_RUN_KIND,), limit=max(1, int(limit)))
        )
        return [
            QueryRun(
                run_id=r.run_id,
                scope=r.scope,
                started_at=r.started_at,
                took_ms=r.took_ms,
                payload=r.payload,
            )
            for r in rows
        ]


def _drain(tx: Tx, queue: deque[tuple[Scope, str, float, dict[str, Any]]]) -> int:
    written = 0
    while True:
        try:
            scope, started_at, took_ms, payload = queue.popleft()
        except IndexError:
            return written
        record_query_run(tx, scope, started_at, took_ms, payload)
        written += 1
