"""Telemetry of a space (spec "Telemetry & Alerts"), computed from the log and the items.

- embedding backlog: entries with ``needs_embedding``, the age of the oldest, an alert past
  ``backlog_alert`` entries or ``backlog_alert_age_s`` seconds;
- backfill: p95 time to embed (queued to embedded) and the failure rate of embedding attempts;
- dedupe saves (``merge`` events), trims and trimmed entries, ``trim_blocked`` alerts (a
  pinned or manually saved entry would have been trimmed);
- hybrid retrieval hit rate: recalls that returned at least one memory; ``used_rate``: recalls
  whose memories the caller reported as used (``mark_used``), the spec's "influenced the model";
- user actions (pin, unpin, forget, settings, incognito, manual saves) in total and per day;
  per day also recalls and recalls that returned something (``recall_hit``), and entries
  embedded by the backfill (``embedded``);
- the embedding backlog over time: per day, the entries waiting at the end of the day
  (``backlog``), rebuilt from each entry's recorded ``queued_at`` and ``embedded_at`` times
  (entries deleted since are not counted); today's value is the current backlog.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from memory_core.filters import Compare, Or
from memory_core.kinds import MEMORY
from memory_core.memories.backfill import p95
from memory_core.memories.controls import load_state
from memory_core.memories.ranking import age_seconds
from memory_core.memories.records import NEEDS_EMBEDDING
from memory_core.memories.responses import MemoryStats
from memory_core.memories.spaces import MemorySpace

if TYPE_CHECKING:
    from memory_core.config import MemorySettings
    from memory_core.scope import Scope
    from memory_core.storage.ports import Tx

__all__ = ["USER_ACTIONS", "space_stats"]

_KINDS = (MEMORY,)
USER_ACTIONS = ("pin", "unpin", "forget", "settings", "incognito", "remember", "import", "export")
_EVENT_LIMIT = 20_000
_RUN_LIMIT = 2_000
_BACKLOG_LIMIT = 20_000
_PAGE = 2_000


def _backlog_by_day(tx: Tx, scope: Scope, *, since: str, days: list[str]) -> dict[str, int]:
    """Entries waiting for an embedding at the end of each of ``days`` (see the docstring)."""
    where = Or(
        (
            NEEDS_EMBEDDING,
            Compare("item.meta.queued_at", ">=", since),
            Compare("item.meta.embedded_at", ">=", since),
        )
    )
    spans: list[tuple[str, str | None]] = []
    after = None
    while len(spans) < _BACKLOG_LIMIT:
        page = tx.items.find(
            scope, kinds=_KINDS, where=where, after=after, limit=_PAGE,
            meta_keys=("queued_at", "embedded_at", "needs_embedding"),
        )  # fmt: skip
        for item in page:
            queued = str(item.metadata.get("queued_at") or item.created_at)
            done = item.metadata.get("embedded_at")
            spans.append((queued, None if item.metadata.get("needs_embedding") else str(done)))
        if len(page) < _PAGE:
            break
        after = page[-1]
    out: dict[str, int] = {}
    for day in days:
        end = f"{day}T23:59:59.999999"
        out[day] = sum(1 for q, e in spans if q[:26] <= end and (e is None or e[:26] > end))
    return out


def space_stats(
    tx: Tx, space: MemorySpace, settings: MemorySettings, *, now: datetime, days: int = 14
) -> MemoryStats:
    scope = space.scope
    state = load_state(tx, scope)
    entries = tx.items.count(scope, kinds=_KINDS)
    pinned = tx.items.count(scope, kinds=_KINDS, where=Compare("item.pinned", "=", 1))
    saved = tx.items.count(scope, kinds=_KINDS, where=Compare("item.meta.manually_saved", "=", 1))
    superseded = tx.items.count(scope, kinds=_KINDS, where=Compare("item.valid_to", ">", ""))
    backlog = tx.items.count(scope, kinds=_KINDS, where=NEEDS_EMBEDDING)
    oldest = tx.items.find(scope, kinds=_KINDS, where=NEEDS_EMBEDDING, order="created", limit=1)
    oldest_age = None
    if oldest:
        queued = str(oldest[0].metadata.get("queued_at") or oldest[0].created_at)
        oldest_age = round(age_seconds(queued, now), 3)

    since = (now - timedelta(days=days)).isoformat(timespec="microseconds")
    events = tx.log.events(scope, limit=_EVENT_LIMIT)
    kinds = Counter(e.kind for e in events)
    trimmed = sum(len(e.payload.get("trimmed", ())) for e in events if e.kind == "trim")
    actions: Counter[str] = Counter()
    for event in events:
        if event.kind == "remember" and not event.payload.get("manually_saved"):
            continue  # an agent's own save is not a user action
        if event.kind in USER_ACTIONS:
            actions[event.kind] += 1

    runs = tx.log.runs(scope, kinds=["memory_backfill", "memory_recall"], limit=_RUN_LIMIT)
    latencies = [
        float(v)
        for r in runs
        if r.kind == "memory_backfill"
        for v in r.payload.get("time_to_embed_ms", ())
    ]
    attempts = sum(int(r.payload.get("attempts", 0)) for r in runs if r.kind == "memory_backfill")
    failures = sum(int(r.payload.get("failures", 0)) for r in runs if r.kind == "memory_backfill")
    for event in events:
        if event.kind == "embed_failure":
            attempts += int(event.payload.get("attempts", 1))
            failures += int(event.payload.get("attempts", 1))
    recalls = [r for r in runs if r.kind == "memory_recall"]
    hits = sum(1 for r in recalls if int(r.payload.get("returned", 0)) > 0)
    used = len({e.payload.get("run_id") for e in events if e.kind == "used"} - {None})

    daily: dict[str, Counter[str]] = {}
    for event in events:
        if event.created_at < since:
            continue
        day = event.created_at[:10]
        daily.setdefault(day, Counter())[event.kind] += 1
    for run in recalls:
        if run.started_at >= since:
            day_counts = daily.setdefault(run.started_at[:10], Counter())
            day_counts["recall"] += 1
            if int(run.payload.get("returned", 0)) > 0:
                day_counts["recall_hit"] += 1
    for run in runs:
        if run.kind == "memory_backfill" and run.started_at >= since:
            embedded = int(run.payload.get("embedded", 0))
            daily.setdefault(run.started_at[:10], Counter())["embedded"] += embedded

    today = now.date()
    window = [(today - timedelta(days=d)).isoformat() for d in range(days - 1, -1, -1)]
    backlog_days = _backlog_by_day(tx, scope, since=since, days=window)
    backlog_days[window[-1]] = backlog  # today: the live count
    for day, waiting in backlog_days.items():
        if waiting or day in daily:
            daily.setdefault(day, Counter())["backlog"] = waiting
    cap = state.soft_cap or settings.soft_cap
    alerts: list[str] = []
    backlog_alert = backlog > settings.backlog_alert or (
        oldest_age is not None and oldest_age > settings.backlog_alert_age_s
    )
    if backlog_alert:
        alerts.append(
            f"embedding backlog: {backlog} entries waiting, oldest {oldest_age or 0:.0f} s; "
            "run `memoir memory backfill`"
        )
    if kinds["trim_blocked"]:
        alerts.append(
            f"{kinds['trim_blocked']} trims would have removed pinned or manually saved entries "
            f"(cap {cap}): raise the soft cap or unpin"
        )
    return MemoryStats(
        user=space.user,
        space=space.space,
        entries=entries,
        pinned=pinned,
        manually_saved=saved,
        superseded=superseded,
        soft_cap=cap,
        backlog=backlog,
        backlog_oldest_age_s=oldest_age,
        backlog_alert=backlog_alert,
        embed_p95_ms=p95(latencies),
        embed_failure_rate=round(failures / attempts, 4) if attempts else None,
        dedupe_saves=kinds["merge"],
        trims=kinds["trim"],
        trimmed_entries=trimmed,
        trim_blocked_alerts=kinds["trim_blocked"],
        recalls=len(recalls),
        recall_hit_rate=round(hits / len(recalls), 4) if recalls else None,
        used_rate=round(used / len(recalls), 4) if recalls else None,
        user_actions=dict(sorted(actions.items())),
        daily=[{"day": day, **dict(counts)} for day, counts in sorted(daily.items())],
        alerts=alerts,
    )
