"""``memory_embed_backfill`` (spec "Background Workers", "Telemetry & Alerts"): batches,
retry with jitter, failures left queued, backlog and time-to-embed metrics, neighbour tags."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from memory_testkit import SPACE

from memory_core.embed import create_embedder
from memory_core.embed.hashing import HashingEncoder
from memory_core.embed.local import LocalEmbedder
from memory_core.errors import EmbeddingError
from memory_core.memories.backfill import p95, run_backfill
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio


class FlakyEmbedder:
    """The hashing embedder behind a fault: the first ``failures`` calls raise (the I/O seam)."""

    def __init__(self, failures: int) -> None:
        self._inner = create_embedder("hash:384")
        self.failures = failures
        self.calls: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        if self.failures > 0:
            self.failures -= 1
            raise EmbeddingError("embedding service unavailable (503)")
        return await self._inner.embed_documents(texts)


async def _queue(memoir: Memoir, count: int) -> list[str]:
    ids = []
    for i in range(count):
        result = await memoir.memories.remember(
            f"Fact {i}: the {['api', 'web', 'db', 'cli'][i % 4]} module {i * 11} is stable",
            space=SPACE, embed_now=False, on_conflict="keep",
        )  # fmt: skip
        ids.append(result.memory.id)  # type: ignore[union-attr]
    return ids


async def test_the_backfill_embeds_the_queue_in_batches(memoir: Memoir) -> None:
    await _queue(memoir, 7)
    stats = await memoir.memories.stats(space=SPACE)
    assert stats.backlog == 7 and stats.backlog_oldest_age_s is not None
    flaky = FlakyEmbedder(failures=0)
    ctx = replace(memoir.context, embedder=flaky)
    report = await run_backfill(ctx, memoir.settings.memories, batch_size=3)
    assert flaky.calls == [3, 3, 1]
    assert (report.embedded, report.batches, report.remaining, report.failed) == (7, 3, 0, 0)
    assert report.p95_time_to_embed_ms is not None and report.per_second > 0
    after = await memoir.memories.stats(space=SPACE)
    assert after.backlog == 0 and after.embed_p95_ms is not None
    assert after.embed_failure_rate == 0.0


async def test_a_failing_embedder_is_retried_with_exponential_backoff_and_jitter(
    memoir: Memoir,
) -> None:
    await _queue(memoir, 2)
    flaky = FlakyEmbedder(failures=2)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    settings = memoir.settings.memories.model_copy(
        update={"backfill_backoff_s": 1.0, "backfill_retries": 3}
    )
    report = await run_backfill(
        replace(memoir.context, embedder=flaky), settings, sleep=sleep, rng=random.Random(7)
    )
    assert report.embedded == 2 and report.attempts == 3
    assert len(waits) == 2
    assert 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0  # backoff x jitter
    assert waits[0] != 1.0 or waits[1] != 2.0
    stats = await memoir.memories.stats(space=SPACE)
    assert stats.embed_failure_rate == pytest.approx(2 / 3, abs=1e-3)


async def test_a_batch_that_keeps_failing_stays_queued_and_is_reported(memoir: Memoir) -> None:
    await _queue(memoir, 3)
    flaky = FlakyEmbedder(failures=100)

    async def sleep(seconds: float) -> None:
        return None

    settings = memoir.settings.memories.model_copy(update={"backfill_retries": 1})
    report = await run_backfill(replace(memoir.context, embedder=flaky), settings, sleep=sleep)
    assert report.embedded == 0 and report.failed == 3 and report.remaining == 3
    assert any("503" in w for w in report.warnings)
    stats = await memoir.memories.stats(space=SPACE)
    assert stats.backlog == 3 and stats.embed_failure_rate == 1.0
    # Recall keeps answering from the sparse arm meanwhile.
    assert (await memoir.memories.recall("module stable", space=SPACE)).results


async def test_the_backlog_alert_fires_past_its_threshold(memoir_factory) -> None:  # type: ignore[no-untyped-def]
    memoir = await memoir_factory(backlog_alert=2)
    await _queue(memoir, 3)
    stats = await memoir.memories.stats(space=SPACE)
    assert stats.backlog_alert and any("backlog" in a for a in stats.alerts)


async def test_neighbours_propose_tags_for_an_entry_with_sparse_tags(memoir: Memoir) -> None:
    await memoir.memories.remember(
        "Blue green deploys switch traffic after health checks pass", space=SPACE,
        tags=["deploys", "ops"],
    )  # fmt: skip
    bare = await memoir.memories.remember(
        "blue green deploys switch traffic", space=SPACE, embed_now=False, on_conflict="keep"
    )
    assert bare.memory is not None and len(bare.memory.tags) == 1  # sparse metadata
    await memoir.memories.backfill(space=SPACE)
    after = await memoir.memories.show(bare.memory.id, space=SPACE)
    assert set(after.tags) - set(bare.memory.tags) == {"deploys", "ops"}


def test_p95_is_the_nearest_rank() -> None:
    assert p95([]) is None
    assert p95([5.0]) == 5.0
    assert p95([float(i) for i in range(1, 101)]) == 95.0


async def test_the_backlog_over_time_is_rebuilt_from_recorded_queue_and_embed_times(
    memoir: Memoir,
) -> None:
    """Each day's backlog comes from the entries' recorded times, not from today's count: three
    entries queued today and embedded tomorrow were waiting at the end of today only."""
    await _queue(memoir, 3)
    today = datetime.now(UTC)
    tomorrow, later = today + timedelta(days=1), today + timedelta(days=2)
    before = await memoir.memories.stats(space=SPACE, now=later)
    by_day = {d["day"]: d.get("backlog", 0) for d in before.daily}
    assert [by_day.get(d.date().isoformat(), 0) for d in (today, tomorrow, later)] == [3, 3, 3]
    report = await run_backfill(memoir.context, memoir.settings.memories, clock=lambda: tomorrow)
    assert report.embedded == 3
    after = await memoir.memories.stats(space=SPACE, now=later)
    by_day = {d["day"]: d.get("backlog", 0) for d in after.daily}
    assert [by_day.get(d.date().isoformat(), 0) for d in (today, tomorrow, later)] == [3, 0, 0]
    assert after.backlog == 0


class ColdEmbedder(LocalEmbedder):
    """The hashing embedder whose model is still loading until the test calls :meth:`finish`
    (the server's state between start-up and the end of its background load)."""

    def __init__(self) -> None:
        super().__init__(HashingEncoder(384), embedder_id="hash:384")
        self.ready = False

    def finish(self) -> None:
        self.ready = True

    def is_ready(self) -> bool:
        return self.ready

    def start_loading(self) -> None:
        pass  # the load "runs" until finish()

    async def ensure_loaded(self) -> None:
        if not self.ready:
            raise EmbeddingError("the embedding model is still loading")


REPLICATION = "Theo ships the postgresql replication upgrade on fridays"
PARAPHRASE = "postgres replicas"  # no word in common with REPLICATION: only its vector finds it


async def test_a_memory_saved_while_the_model_loads_is_embedded_once_it_is_ready(
    memoir_factory,  # type: ignore[no-untyped-def]
) -> None:
    cold = ColdEmbedder()
    memoir = await memoir_factory("cold.db", embedder=cold)
    saved = await memoir.memories.remember(REPLICATION, space=SPACE)
    assert saved.memory is not None and saved.memory.needs_embedding
    assert any("still loading" in w for w in saved.warnings)
    early = await memoir.memories.recall(PARAPHRASE, space=SPACE)
    assert early.results == []  # no vector yet, no shared word

    cold.finish()
    recalled = await memoir.memories.recall(PARAPHRASE, space=SPACE, explain=True)

    assert [r.id for r in recalled.results] == [saved.memory.id]
    assert recalled.explain["lexical"] == []  # found by its vector alone
    shown = await memoir.memories.show(saved.memory.id, space=SPACE)
    assert not shown.needs_embedding


async def test_the_next_remember_once_the_model_is_ready_embeds_the_queued_memories(
    memoir_factory,  # type: ignore[no-untyped-def]
) -> None:
    cold = ColdEmbedder()
    memoir = await memoir_factory("cold.db", embedder=cold)
    saved = await memoir.memories.remember(REPLICATION, space=SPACE)
    assert saved.memory is not None

    cold.finish()
    await memoir.memories.remember("Theo reviews pull requests in the morning", space=SPACE)

    shown = await memoir.memories.show(saved.memory.id, space=SPACE)
    assert not shown.needs_embedding
    stats = await memoir.memories.stats(space=SPACE)
    assert stats.backlog == 0


async def test_a_memory_left_queued_by_an_earlier_process_is_embedded_by_the_next_one(
    memoir_factory,  # type: ignore[no-untyped-def]
) -> None:
    first = await memoir_factory("shared.db", embedder=ColdEmbedder())
    saved = await first.memories.remember(REPLICATION, space=SPACE)
    assert saved.memory is not None
    await first.close()  # the server stopped before its model finished loading

    second = await memoir_factory("shared.db")
    recalled = await second.memories.recall(PARAPHRASE, space=SPACE)

    assert [r.id for r in recalled.results] == [saved.memory.id]


async def test_each_call_embeds_at_most_one_batch_of_the_queue_until_it_is_empty(
    memoir_factory,  # type: ignore[no-untyped-def]
) -> None:
    cold = ColdEmbedder()
    memoir = await memoir_factory("cold.db", embedder=cold, backfill_batch=2)
    for topic in ("deploys", "billing", "search"):
        await memoir.memories.remember(f"Theo owns the {topic} runbook", space=SPACE)
    cold.finish()

    await memoir.memories.recall("runbook owner", space=SPACE)
    assert (await memoir.memories.stats(space=SPACE)).backlog == 1
    await memoir.memories.recall("runbook owner", space=SPACE)
    assert (await memoir.memories.stats(space=SPACE)).backlog == 0


async def test_a_graph_node_created_while_the_model_loads_is_found_by_a_paraphrase_later(
    memoir_factory,  # type: ignore[no-untyped-def]
) -> None:
    """Compatibility mode's nodes: one written before the model was ready was stored without
    a vector and stayed so; search_nodes now embeds the queued nodes once the model is ready."""
    cold = ColdEmbedder()
    memoir = await memoir_factory("cold.db", embedder=cold)
    graph = memoir.memories.graph
    space = memoir.memories.space(SPACE)
    await graph.create_entities(
        space, [{"name": "Theo", "entityType": "person", "observations": [REPLICATION]}]
    )
    assert (await graph.search_nodes(space, PARAPHRASE))["entities"] == []  # no vector yet

    cold.finish()
    found = await graph.search_nodes(space, PARAPHRASE)

    assert [e["name"] for e in found["entities"]] == ["Theo"]


async def test_a_graph_node_rewritten_while_the_model_loads_loses_its_old_vector_until_embedded(
    memoir_factory,  # type: ignore[no-untyped-def]
) -> None:
    """A node's text changed while the model loads: the old text's vector must not answer for
    the new text (it is dropped), and the new text is embedded once the model is ready."""
    cold = ColdEmbedder()
    cold.finish()
    memoir = await memoir_factory("cold.db", embedder=cold)
    graph = memoir.memories.graph
    space = memoir.memories.space(SPACE)
    await graph.create_entities(
        space, [{"name": "Theo", "entityType": "person", "observations": ["likes tea"]}]
    )
    cold.ready = False
    await graph.add_observations(space, [{"entityName": "Theo", "contents": [REPLICATION]}])
    assert (await graph.search_nodes(space, PARAPHRASE))["entities"] == []

    cold.finish()
    found = await graph.search_nodes(space, PARAPHRASE)

    assert [e["name"] for e in found["entities"]] == ["Theo"]
