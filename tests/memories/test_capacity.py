"""The soft cap (spec "Capacity Trimming"): trim by cached totals, recompute stale scores,
never trim pinned or manually saved entries, alert when one would have been trimmed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from memory_testkit import SPACE

from memory_core.service import Memoir

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 6, 1, tzinfo=UTC)
TOPICS = ["billing", "search", "checkout", "identity", "payments", "growth", "infra", "mobile"]
WORDS = ["amber", "birch", "cedar", "dune", "ember", "fjord", "grove", "heath", "inlet", "jade",
         "kelp", "larch", "moss", "nook", "oak", "pine"]  # fmt: skip
_used = iter(range(10_000))


async def _fill(
    memoir: Memoir, count: int, *, days_old: float = 0.0, **kwargs: object
) -> list[str]:
    ids = []
    for _ in range(count):
        i = next(_used)
        result = await memoir.memories.remember(
            f"The {TOPICS[i % len(TOPICS)]} service {WORDS[i % len(WORDS)]} is owned by team "
            f"{WORDS[(i * 7 + 3) % len(WORDS)]} {TOPICS[(i * 3) % len(TOPICS)]}",
            space=SPACE, created_at=NOW - timedelta(days=days_old), now=NOW,
            on_conflict="keep", embed_now=False, **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip
        assert result.status == "created", result
        ids.append(result.memory.id)  # type: ignore[union-attr]
    return ids


async def test_the_space_is_trimmed_to_the_cap_by_lowest_cached_total(memoir_factory) -> None:  # type: ignore[no-untyped-def]
    memoir = await memoir_factory(soft_cap=5)
    old = await _fill(memoir, 3, days_old=20)  # recency ~0.06: the lowest totals
    new = await _fill(memoir, 2)
    extra = await memoir.memories.remember(
        "Brand new fact about the checkout owner", space=SPACE, now=NOW, embed_now=False
    )
    assert extra.trimmed == [old[0]]
    left = {e.id for e in (await memoir.memories.entries(space=SPACE, limit=50)).entries}
    assert left == {*old[1:], *new, extra.memory.id}  # type: ignore[union-attr]
    scope = memoir.memories.space(SPACE).scope
    events = await memoir.store.read(lambda tx: tx.log.events(scope, kinds=["trim"]))
    assert events[0].payload["trimmed"] == [old[0]]


async def test_pinned_and_manually_saved_entries_are_never_trimmed_and_raise_an_alert(
    memoir_factory,  # type: ignore[no-untyped-def]
) -> None:
    memoir = await memoir_factory(soft_cap=3)
    pinned = await _fill(memoir, 1, days_old=60, pin=True)
    saved = await _fill(memoir, 1, days_old=60, manually_saved=True)
    plain = await _fill(memoir, 1, days_old=10)
    extra = await memoir.memories.remember("One more fact about search", space=SPACE, now=NOW)
    assert extra.trimmed == plain
    assert set(extra.trim_blocked) & {*pinned, *saved}  # would have gone without protection
    left = {e.id for e in (await memoir.memories.entries(space=SPACE)).entries}
    assert {*pinned, *saved} <= left
    stats = await memoir.memories.stats(space=SPACE, now=NOW)
    assert stats.trim_blocked_alerts == 1
    assert any("pinned or manually saved" in a for a in stats.alerts)


async def test_a_full_space_of_protected_entries_trims_nothing(memoir_factory) -> None:  # type: ignore[no-untyped-def]
    memoir = await memoir_factory(soft_cap=2)
    await _fill(memoir, 3, pin=True)
    assert (await memoir.memories.entries(space=SPACE)).total == 3


async def test_stale_cached_scores_are_recomputed_before_trimming(memoir_factory) -> None:  # type: ignore[no-untyped-def]
    memoir = await memoir_factory(soft_cap=2)
    # Both written "now" (cached recency 1.0); two weeks later the first is much older.
    first = await memoir.memories.remember(
        "Old note about the rota A", space=SPACE, created_at=NOW - timedelta(days=30), now=NOW
    )
    second = await memoir.memories.remember(
        "Newer note about the rota B", space=SPACE, created_at=NOW + timedelta(days=14), now=NOW
    )
    later = NOW + timedelta(days=14)
    extra = await memoir.memories.remember("A third note about rota C", space=SPACE, now=later)
    assert extra.trimmed == [first.memory.id]  # type: ignore[union-attr]
    kept = await memoir.memories.show(second.memory.id, space=SPACE)  # type: ignore[union-attr]
    assert kept.last_scores is not None
    assert kept.last_scores["computed_at"] == later.isoformat(timespec="microseconds")
    assert kept.last_scores["relevance"] == 0.0


async def test_the_cap_is_configurable_per_space(memoir: Memoir) -> None:
    await memoir.memories.update_settings(space=SPACE, soft_cap=2)
    await _fill(memoir, 4)
    assert (await memoir.memories.entries(space=SPACE)).total == 2
    assert (await memoir.memories.settings(space=SPACE)).soft_cap == 2
