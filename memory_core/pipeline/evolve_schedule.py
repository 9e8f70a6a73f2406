"""The internal schedule of evolve (seed 004 §6.1: evolve is "triggered externally or
scheduled internally"). Opt-in, set when the service is created.

    MemoryService.create(..., evolve_schedule={"every_memorizes": 20, "min_interval_s": 600})

After a memorize of a scope stores something new, the service asks :func:`evolve_due` whether
that scope's evolve is due: at least ``every_memorizes`` memorize runs of the scope since its
last finished evolve, and at least ``min_interval_s`` seconds since that evolve (either may be
left out, not both). The answer is read from the run log, not from counters in this process,
so the CLI (one memorize per process) and several processes on one store count the same runs.
At most the newest ``scan_runs`` entries of the log are read (a scope whose last evolve lies
further back counts only the memorizes within them); :class:`RunLogTail` keeps them in the
process and reads only what was logged since its last look.

A due evolve then runs through :meth:`MemoryService.evolve` (the same runner, logged as an
evolve run, its input marked ``"trigger": "schedule"``). Two evolves of one scope never run
at once: :class:`ScopeLocks` holds the scope in this process, and :class:`ScopeLeases` across
the processes on one store (a lease row in the store, renewed while the evolve runs, expiring
:data:`LEASE_TTL_S` after a holder that crashed). A scheduled evolve that finds either held is
skipped (the next memorize asks again); an external call waits for both (the lease at most
``wait_s``, then :class:`~memory_core.errors.DatabaseLockedError`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from memory_core.errors import ConfigError, DatabaseLockedError, MemoirError
from memory_core.storage.layer import RunRow

__all__ = [
    "LEASE_TTL_S",
    "EvolveSchedule",
    "LeaseStore",
    "RunLogTail",
    "ScheduleCheck",
    "ScopeLeases",
    "ScopeLocks",
    "evolve_due",
]

log = structlog.get_logger(__name__)

LEASE_TTL_S = 60.0
"""How long a scope's evolve lease lasts without renewal: a crashed holder blocks the scope's
evolves across processes at most this long. A live holder renews it every third of it."""

_KEYS = ("every_memorizes", "min_interval_s", "scan_runs")


@dataclass(frozen=True)
class EvolveSchedule:
    """When a scope's evolve runs by itself: after ``every_memorizes`` memorizes and/or once
    ``min_interval_s`` has passed since its last evolve; ``scan_runs`` bounds the log read."""

    every_memorizes: int | None = None
    min_interval_s: float | None = None
    scan_runs: int = 500

    @classmethod
    def parse(cls, value: EvolveSchedule | Mapping[str, Any] | None) -> EvolveSchedule | None:
        """The schedule from its creation argument or layer-file table (``None``: none).

        Raises:
            ConfigError: an unknown key, a value that is not a positive number, or neither
                ``every_memorizes`` nor ``min_interval_s`` given.
        """
        if value is None or isinstance(value, EvolveSchedule):
            schedule = value
        else:
            unknown = sorted(set(value) - set(_KEYS))
            if unknown:
                raise ConfigError(
                    f"evolve_schedule has unknown keys {unknown}", hint=f"use {list(_KEYS)}"
                )
            try:
                every = value.get("every_memorizes")
                interval = value.get("min_interval_s")
                schedule = cls(
                    every_memorizes=None if every is None else int(every),
                    min_interval_s=None if interval is None else float(interval),
                    scan_runs=int(value.get("scan_runs", 500)),
                )
            except (TypeError, ValueError) as exc:
                raise ConfigError(
                    f"evolve_schedule {dict(value)!r} has a value that is not a number ({exc})",
                    hint="e.g. evolve_schedule={'every_memorizes': 20, 'min_interval_s': 600}",
                ) from exc
        if schedule is None:
            return None
        if schedule.every_memorizes is None and schedule.min_interval_s is None:
            raise ConfigError(
                "evolve_schedule sets neither every_memorizes nor min_interval_s",
                hint="give one or both, e.g. {'every_memorizes': 20}, or leave it out",
            )
        for name in _KEYS:
            given = getattr(schedule, name)
            if given is not None and given <= 0:
                raise ConfigError(
                    f"evolve_schedule {name} must be positive (got {given!r})",
                    hint=f"set {name} to e.g. 20, or leave it out",
                )
        return schedule

    def describe(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _KEYS}


@dataclass(frozen=True)
class ScheduleCheck:
    """Whether a scope's evolve is due, and why (for the memorize result)."""

    due: bool
    memorizes: int
    since_evolve_s: float | None
    reason: str


def evolve_due(
    schedule: EvolveSchedule, runs: Sequence[RunRow], scope: Mapping[str, str], now: float
) -> ScheduleCheck:
    """Reads ``runs`` (the log, newest first) back to the scope's last finished evolve, and
    stops as soon as the answer is known: at that evolve, or once the count is reached and
    every run left is older than the interval. Pure.

    A memorize counts when it stored something (status ok; a duplicate is ``skipped``); an
    evolve resets the count when it finished (a failed one leaves the count, so it is tried
    again).
    """
    every, interval = schedule.every_memorizes, schedule.min_interval_s
    memorizes = 0
    for run in runs:
        counted = every is None or memorizes >= every
        if counted and (interval is None or run.created_at <= now - interval):
            # the scope's last evolve, if any, is older still: due whatever it was
            return ScheduleCheck(True, memorizes, None, _due_reason(memorizes, None))
        if run.body.get("scope_range") != scope or run.body.get("status") != "ok":
            continue
        if run.kind == "evolve":
            return _decide(schedule, memorizes, max(now - run.created_at, 0.0))
        if run.kind == "memorize":
            memorizes += 1
    return _decide(schedule, memorizes, None)


class RunLogTail:
    """The newest ``size`` entries of the run log, kept in this process and topped up on each
    look with what was logged since (by this process or another), read in growing windows
    (4, 16, 64, …) until a run already held: a memorize then reads a few rows, not
    ``size``. A run logged with an older time than the newest one held is not seen."""

    _FIRST_WINDOW = 4

    def __init__(self, size: int) -> None:
        self.size = size
        self._rows: list[RunRow] = []
        self._lock = threading.Lock()

    def read(self, read_runs: Callable[[int], Sequence[RunRow]]) -> list[RunRow]:
        """The tail, newest first, after reading what is new with ``read_runs(limit)``."""
        with self._lock:
            known = {row.run_id for row in self._rows}
            window = self._FIRST_WINDOW if known else self.size
            while True:
                fresh = list(read_runs(min(window, self.size)))
                seen = next((n for n, row in enumerate(fresh) if row.run_id in known), None)
                if seen is not None:
                    self._rows = (fresh[:seen] + self._rows)[: self.size]
                    break
                if len(fresh) < window or window >= self.size:
                    self._rows = fresh[: self.size]
                    break
                window *= 4
            return list(self._rows)


def _decide(schedule: EvolveSchedule, memorizes: int, since: float | None) -> ScheduleCheck:
    waiting: list[str] = []
    every, interval = schedule.every_memorizes, schedule.min_interval_s
    if every is not None and memorizes < every:
        waiting.append(f"{memorizes} of {every} memorizes since the last evolve")
    if interval is not None and since is not None and since < interval:
        waiting.append(f"{since:.0f} s of {interval:.0f} s since the last evolve")
    if waiting:
        return ScheduleCheck(False, memorizes, since, "; ".join(waiting))
    return ScheduleCheck(True, memorizes, since, _due_reason(memorizes, since))


def _due_reason(memorizes: int, since: float | None) -> str:
    last = "no evolve within the runs read" if since is None else f"last evolve {since:.0f} s ago"
    return f"{memorizes} memorizes of the scope since its last evolve; {last}"


class ScopeLocks:
    """One lock per scope: at most one evolve of a scope runs at a time in this process."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[tuple[tuple[str, str], ...], threading.Lock] = {}

    def _lock(self, scope: Mapping[str, str]) -> threading.Lock:
        key = tuple(sorted(scope.items()))
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    @contextmanager
    def hold(self, scope: Mapping[str, str], *, wait: bool) -> Iterator[bool]:
        """Holds the scope's lock for the block; yields False (without it) when ``wait`` is
        False and another evolve of the scope holds it."""
        lock = self._lock(scope)
        acquired = lock.acquire(blocking=wait)
        try:
            yield acquired
        finally:
            if acquired:
                lock.release()


class LeaseStore(Protocol):
    """What :class:`ScopeLeases` needs of the layer store."""

    def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool: ...

    def release_lease(self, name: str, holder: str) -> None: ...


def evolve_lease_name(scope: Mapping[str, str]) -> str:
    """The store-wide name of a scope's evolve lease."""
    return "evolve " + json.dumps(dict(sorted(scope.items())), separators=(",", ":"))


class ScopeLeases:
    """One lease per scope in the layer store: at most one evolve of a scope runs at a time
    across every process on the store. The holder renews it every ``ttl_s / 3`` while the
    block runs, and drops it at the end; a holder that crashed loses it ``ttl_s`` later."""

    def __init__(
        self,
        store: LeaseStore,
        *,
        ttl_s: float = LEASE_TTL_S,
        wait_s: float = 900.0,
        poll_s: float = 0.2,
    ) -> None:
        self._store = store
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self.poll_s = poll_s

    @contextmanager
    def hold(self, scope: Mapping[str, str], *, wait: bool) -> Iterator[bool]:
        """Holds the scope's lease for the block; yields False (without it) when ``wait`` is
        False and another holder's lease is live.

        Raises:
            DatabaseLockedError: ``wait`` and the lease stayed another's for ``wait_s``.
        """
        name = evolve_lease_name(scope)
        holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        if not self._claim(name, holder, wait=wait):
            yield False
            return
        stop = threading.Event()
        renewer = threading.Thread(
            target=self._renew, args=(name, holder, stop), name="evolve-lease", daemon=True
        )
        renewer.start()
        try:
            yield True
        finally:
            stop.set()
            renewer.join(self.ttl_s)
            try:
                self._store.release_lease(name, holder)
            except MemoirError as exc:  # it expires by itself: the evolve's result stands
                log.warning("evolve lease not released", lease=name, error=exc.message)

    def _claim(self, name: str, holder: str, *, wait: bool) -> bool:
        deadline = time.monotonic() + self.wait_s
        pause = threading.Event()  # never set: a bounded wait between tries
        while not self._store.claim_lease(name, holder, self.ttl_s):
            if not wait:
                return False
            if time.monotonic() >= deadline:
                raise DatabaseLockedError(
                    f"another process has held the evolve of {name[7:]} for over "
                    f"{self.wait_s:.0f} s",
                    hint="try the evolve again later; a crashed holder's lease expires "
                    f"{self.ttl_s:.0f} s after its last renewal",
                    details={"lease": name},
                )
            pause.wait(self.poll_s)
        return True

    def _renew(self, name: str, holder: str, stop: threading.Event) -> None:
        while not stop.wait(self.ttl_s / 3):
            try:
                kept = self._store.claim_lease(name, holder, self.ttl_s)
            except MemoirError as exc:  # tried again at the next beat, before it expires
                log.warning("evolve lease not renewed", lease=name, error=exc.message)
                continue
            if not kept:
                log.warning("evolve lease lost to another holder", lease=name)
                return
