"""Telemetry (spec "Telemetry & Alerts") from the recorded events and runs, per day: the
hybrid retrieval hit rate and the share of recalls whose memories were used, dedupe saves,
trims and trimmed entries, user actions. (The embedding backlog over time and its alert are in
``test_backfill.py``; the dashboard drawing them in ``test_web_page.py``.)"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from memory_testkit import SPACE

from memory_core.service import Memoir

pytestmark = pytest.mark.anyio


async def test_hit_rate_used_rate_dedupe_trims_and_actions_are_counted_per_day(
    memoir_factory,  # type: ignore[no-untyped-def]
) -> None:
    memoir: Memoir = await memoir_factory(soft_cap=2)
    # Sparse-only entries, so a query of other words finds nothing (no dense arm to reach it).
    cache = await memoir.memories.remember(
        "The cache TTL is 300 seconds", space=SPACE, embed_now=False
    )
    assert cache.memory is not None
    assert (await memoir.memories.pin(cache.memory.id, space=SPACE)).pinned
    await memoir.memories.remember("Releases ship on Tuesdays", space=SPACE, embed_now=False)
    merged = await memoir.memories.remember("Releases ship on Tuesdays!", space=SPACE)
    assert merged.status == "merged"
    third = await memoir.memories.remember("Use pnpm, not npm", space=SPACE, embed_now=False)
    assert len(third.trimmed) == 1  # over the cap of 2: one unpinned entry trimmed
    found = await memoir.memories.recall("cache TTL", space=SPACE, explain=True)
    assert found.results and found.explain is not None
    missed = await memoir.memories.recall("kubernetes clusters", space=SPACE)
    assert missed.results == []
    await memoir.memories.recall("cache", space=SPACE)
    await memoir.memories.mark_used(
        [found.results[0].id], space=SPACE, run_id=found.explain["run_id"]
    )

    stats = await memoir.memories.stats(space=SPACE)
    assert stats.recalls == 3
    assert stats.recall_hit_rate == pytest.approx(2 / 3, abs=1e-4)
    assert stats.used_rate == pytest.approx(1 / 3, abs=1e-4)
    assert stats.dedupe_saves == 1
    assert (stats.trims, stats.trimmed_entries) == (1, 1)
    assert stats.user_actions["pin"] == 1
    today = {d["day"]: d for d in stats.daily}[datetime.now(UTC).date().isoformat()]
    assert (today["recall"], today["recall_hit"]) == (3, 2)
    assert (today["merge"], today["trim"], today["pin"]) == (1, 1, 1)
