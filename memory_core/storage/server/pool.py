"""A small pool of blocking connections for a server backend, used from worker threads.

The storage ports run a feature's whole unit of work as one synchronous callback (see
:mod:`memory_core.storage.ports`), so a server store keeps a few blocking connections and runs
each callback in a worker thread on one of them, inside one transaction. A deadlock or
serialization failure rolls the transaction back and the callback runs again (it has no side
effects outside the transaction); a dropped connection is replaced and the callback retried.
A backend subclass says how to connect, open and end a transaction, and what its errors mean.
"""

from __future__ import annotations

import contextlib
import queue
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio
import structlog

from memory_core.errors import MemoirError
from memory_core.storage.url import DatabaseURL

__all__ = ["ServerPool"]

T = TypeVar("T")
C = TypeVar("C")
log = structlog.get_logger(__name__)

_RETRIES = 5


class ServerPool(Generic[C]):
    """Blocking connections of type ``C`` to one database, one transaction per callback."""

    def __init__(self, url: DatabaseURL, *, pool_size: int = 4) -> None:
        self.url = url
        self._size = max(1, pool_size)
        self._idle: queue.LifoQueue[C] = queue.LifoQueue()
        self._all: list[C] = []
        self._guard = threading.Lock()
        self._limiter = anyio.CapacityLimiter(self._size)
        self.reconnects = 0  # dropped connections replaced (a server restart, a kill)
        self.retries = _RETRIES  # runs of a callback after a drop or a transient failure

    # -- what a backend supplies -----------------------------------------------------------

    def _connect(self) -> C:
        """A new autocommit connection (raises a DatabaseUnavailableError that says why not)."""
        raise NotImplementedError

    def _usable(self, conn: C) -> bool:
        raise NotImplementedError

    def _close(self, conn: C) -> None:
        raise NotImplementedError

    def _begin(self, conn: C, *, write: bool, snapshot: bool) -> None:
        raise NotImplementedError

    def _end(self, conn: C, *, commit: bool) -> None:
        raise NotImplementedError

    def _driver_error(self) -> type[BaseException] | tuple[type[BaseException], ...]:
        """The driver's base error class."""
        raise NotImplementedError

    def _transient(self, exc: BaseException) -> bool:
        """Run the transaction again (deadlock, serialization failure, a lost race)."""
        raise NotImplementedError

    def _unavailable(self, exc: BaseException) -> MemoirError:
        raise NotImplementedError

    def _statement_error(self, exc: BaseException) -> MemoirError:
        raise NotImplementedError

    def _prepare(self, conn: C) -> C:
        """What the callback is given for ``conn`` (a wrapper, type adapters...)."""
        return conn

    def migrate(self, *, create: bool = True) -> list[str]:
        """Apply the backend's pending schema migrations; the names of those applied."""
        raise NotImplementedError

    # -- connections -----------------------------------------------------------------------

    def _take(self) -> C:
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._connect()
                with self._guard:
                    self._all.append(conn)
                return conn
            if self._usable(conn):
                return conn
            self._forget(conn)

    def _give_back(self, conn: C) -> None:
        self._idle.put(conn)

    def _forget(self, conn: C) -> None:
        with self._guard:
            if conn in self._all:
                self._all.remove(conn)
        with contextlib.suppress(Exception):
            self._close(conn)

    def close_all(self) -> None:
        with self._guard:
            conns, self._all = list(self._all), []
        while not self._idle.empty():
            self._idle.get_nowait()
        for conn in conns:
            with contextlib.suppress(Exception):
                self._close(conn)

    # -- running callbacks -----------------------------------------------------------------

    def run_sync(
        self,
        fn: Callable[[Any], T],
        *,
        write: bool,
        snapshot: bool = True,
        transaction: bool = True,
    ) -> T:
        """``fn(conn)`` in one transaction (read-only, one snapshot, unless ``write``);
        ``transaction=False`` runs it in autocommit (one statement is atomic on its own, and
        saves the two round trips of BEGIN and COMMIT)."""
        attempt = 0
        while True:
            conn = self._take()
            try:
                prepared = self._prepare(conn)
                if transaction:
                    self._begin(conn, write=write, snapshot=snapshot)
                try:
                    result = fn(prepared)
                except BaseException:
                    if transaction and self._usable(conn):
                        self._end(conn, commit=False)
                    raise
                if transaction:
                    self._end(conn, commit=True)
                self._give_back(conn)
                return result
            except MemoirError:
                self._give_back(conn) if self._usable(conn) else self._forget(conn)
                raise
            except self._driver_error() as exc:
                transient = self._transient(exc)
                dropped = not self._usable(conn)
                if dropped:
                    # A restart or a killed session: the idle ones are likely gone too.
                    self._forget(conn)
                    while not self._idle.empty():
                        self._forget(self._idle.get_nowait())
                    self.reconnects += 1
                    log.warning(
                        "database connection lost; reconnecting",
                        url=self.url.redacted(),
                        cause=type(exc).__name__,
                    )
                else:
                    self._give_back(conn)
                if (transient or dropped) and attempt < self.retries:
                    attempt += 1
                    time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random() / 2))
                    continue
                if dropped:
                    raise self._unavailable(exc) from exc
                raise self._statement_error(exc) from exc

    async def read(self, fn: Callable[[Any], T]) -> T:
        return await anyio.to_thread.run_sync(
            lambda: self.run_sync(fn, write=False), limiter=self._limiter
        )

    async def write(self, fn: Callable[[Any], T]) -> T:
        return await anyio.to_thread.run_sync(
            lambda: self.run_sync(fn, write=True), limiter=self._limiter
        )
