"""The server's hold on the store: opened in the background, reopened after a failure,
drained before it closes.

One :class:`MemoirRuntime` per server process, shared by every session and transport (an SSE
server runs one MCP session per connection; they must share one store, one embedder, one rate
limiter). Start-up never waits for it: ``initialize`` and ``tools/list`` are answered while the
store opens and the embedding model loads.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from memory_core.errors import (
    DatabaseCorruptError,
    DatabaseUnavailableError,
    MemoirError,
)
from memory_core.models import StoreHealth
from memory_core.service import Memoir
from server.mcp_app.limits import RateLimiter
from server.mcp_app.scoping import ScopeDefaults

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from memory_core.config import Settings

__all__ = ["MemoirRuntime", "refuse_unwritable"]

log = structlog.get_logger(__name__)


class MemoirRuntime:
    """The open :class:`~memory_core.service.Memoir`, its lifecycle, and per-call bookkeeping.

    Args:
        settings: the server's settings.
        db_url: the store URL (``--db``), else resolved from the settings.
        scope_defaults: the scope fallbacks the server was started with.
        embedder: an embedder to use instead of the configured one (tests: ``hash:384``).
    """

    def __init__(
        self,
        settings: Settings,
        db_url: str | None = None,
        *,
        scope_defaults: ScopeDefaults | None = None,
        embedder: Any = None,
    ) -> None:
        self.settings = settings
        self.db_url = db_url
        self.scope_defaults = scope_defaults or ScopeDefaults()
        self.rate_limiter = RateLimiter(settings.server.rate_limit_per_minute)
        self._embedder = embedder
        self._memoir: Memoir | None = None
        self._open_lock = anyio.Lock()
        self._in_flight = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._closing = False
        self._task_group: TaskGroup | None = None
        self._warming = False

    # -- the store ---------------------------------------------------------------------------

    async def memoir(self) -> Memoir:
        """The open facade, opening it on first use (or again after a failed open).

        Raises:
            MemoirError: the store cannot be opened (missing folder, corrupt file, locked…);
                the next call tries again, so fixing the file needs no restart.
        """
        if self._memoir is not None:
            return self._memoir
        async with self._open_lock:
            if self._memoir is None:
                # Shielded: an open cut short by a disconnect would leave the SQLite worker
                # thread answering a closed event loop, and the half-opened store unclosed.
                with anyio.CancelScope(shield=True):
                    self._memoir = await self._open()
            opened = self._memoir
        assert opened is not None  # set above, or _open raised
        return opened

    async def _open(self) -> Memoir:
        # The facade pulls numpy, the store and the embedder seam (~0.5 s of imports): import
        # in a worker thread so the event loop keeps answering initialize / tools/list.
        service = await anyio.to_thread.run_sync(importlib.import_module, "memory_core.service")
        memoir = await service.Memoir.open(
            self.db_url, settings=self.settings, embedder=self._embedder
        )
        memoir.warm_up()
        log.info("store opened", url=_redact(memoir.context.url))
        # A configured model that cannot be used is said here, and in every result that needed it.
        from memory_core.llm.availability import llm_problems

        for problem, steps in await anyio.to_thread.run_sync(llm_problems, self.settings.llm):
            log.warning("llm model unusable", problem=problem.sentence(steps))
        return memoir

    async def open_in_background(self) -> None:
        """Open the store now so the first call does not pay for it; failures are only logged
        (each call reports them to the client with the recovery steps)."""
        try:
            await self.memoir()
        except MemoirError as error:
            log.warning("store not available yet", error=error.message, hint=error.hint)

    def attach(self, task_group: TaskGroup) -> None:
        """Give the runtime the serving task group, for :meth:`warm` to open the store in."""
        self._task_group = task_group

    def warm(self) -> None:
        """Open the store and start loading the model in the background, once.

        Called after ``tools/list`` is answered rather than at spawn: the facade's imports run
        in a thread, and competing with the handshake for the GIL would slow the very answers
        clients wait on at start-up.
        """
        if self._warming or self._task_group is None or self._memoir is not None:
            return
        self._warming = True
        self._task_group.start_soon(self.open_in_background)

    async def store_health(self, memoir: Memoir | None = None) -> StoreHealth:
        """The open store's health (file still in place, last quick check), or ``unknown``
        for a backend without these checks."""
        memoir = memoir if memoir is not None else self._memoir
        store = memoir.context.store if memoir is not None else None
        check = getattr(store, "health", None)
        if check is None:
            return StoreHealth("unknown", "no health checks for this backend")
        health: StoreHealth = await check()
        return health

    def embedder_ready(self) -> bool:
        memoir = self._memoir
        return bool(memoir is not None and memoir.embedder.is_ready())

    # -- calls -------------------------------------------------------------------------------

    @asynccontextmanager
    async def call(self, tool: str, client: str) -> AsyncIterator[None]:
        """Bookkeeping around one tool call: refuse while stopping, rate-limit, count in-flight.

        Raises:
            DatabaseUnavailableError: the server is stopping (the store is closing).
            RateLimitedError: the client is over its rate.
        """
        if self._closing:
            raise DatabaseUnavailableError(
                f"the memoir server is shutting down; {tool} was not run",
                hint="call again once the client has restarted the server",
            )
        self.rate_limiter.check(client)
        self._in_flight += 1
        self._idle = anyio.Event() if self._in_flight == 1 else self._idle
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def aclose(self, *, drain_timeout: float = 10.0) -> None:
        """Stop taking calls, let the running ones finish (bounded), then close the store.

        Every write is its own committed transaction, so what a finished call wrote is on disk;
        the drain keeps a call that is mid-write from being cut off.
        """
        self._closing = True
        with anyio.move_on_after(drain_timeout) as scope:
            await self._idle.wait()
        if scope.cancelled_caught:
            log.warning("shutdown drain timed out", in_flight=self._in_flight)
        memoir, self._memoir = self._memoir, None
        if memoir is not None:
            with anyio.CancelScope(shield=True):
                await self._settle_embedder(memoir, drain_timeout)
                await memoir.close()
            log.info("store closed")

    @staticmethod
    async def _settle_embedder(memoir: Memoir, timeout: float) -> None:
        # Exiting while the model loads in its background thread aborts the interpreter
        # (onnxruntime's threads outlive it): let a load already under way finish first.
        if memoir.embedder.is_ready():
            return
        with anyio.move_on_after(timeout):
            try:
                await memoir.embedder.ensure_loaded()
            except MemoirError as error:  # the server is stopping; a failed load changes nothing
                log.info("embedder did not load before shutdown", error=error.message)


def refuse_unwritable(health: StoreHealth) -> None:
    """Refuse a write tool before it starts when the store cannot keep what it writes.

    Raises:
        DatabaseUnavailableError: the file was deleted or replaced under the server.
        DatabaseCorruptError: the store failed its integrity check.
    """
    if health.status in ("replaced", "read_only"):
        raise DatabaseUnavailableError(health.detail, hint=health.hint)
    if health.status == "corrupt":
        raise DatabaseCorruptError(
            f"refusing to write: the store failed its integrity check ({health.detail})",
            hint=health.hint,
        )


def _redact(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
