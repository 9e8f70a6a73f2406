"""Every query_directives call is recorded in the ``run`` table (DESIGN §6, Req 12.1–12.2)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from rules_testkit import open_memoir

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.rules.persistence import QUERY_RUN_KIND, record_query_run
from memory_core.rules.runs import RunRecorder
from memory_core.rules.service import RulesService
from memory_core.scope import Scope
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio

TASK = "Add a login endpoint that creates user sessions"


def _raw_runs(conn: Any) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT run_id, scope, kind, started_at, took_ms, payload FROM run ORDER BY run_id"
    ).fetchall()


async def test_a_query_records_one_run_with_its_diagnostics(loaded: RulesService) -> None:
    result = await loaded.query_directives(TASK, scope="s", token_budget=400, mode_slug="code")
    await loaded.close()  # the run is written in the background; close waits for it
    rows = await loaded._ctx.store.db.read(_raw_runs)
    assert len(rows) == 1
    _, scope, kind, started_at, took_ms, raw = rows[0]
    assert (scope, kind) == ("s", "rules_query")
    assert started_at.endswith("+00:00")
    assert took_ms == result.diagnostics.execution_ms
    payload = json.loads(raw)
    d = result.diagnostics
    stats = d.retrieval_stats
    assert payload["task"] == TASK
    assert payload["detected_layer"] == d.detected_layer == "2-Application"
    assert payload["topics"] == d.topics
    assert payload["confidence"] == d.confidence
    assert (payload["searched"], payload["considered"], payload["selected"]) == (
        stats.searched,
        stats.considered,
        stats.selected,
    )
    assert payload["token_budget"] == 400
    assert payload["tokens_used"] == d.tokens_used
    assert payload["warnings"] == d.warnings
    assert payload["mode"] == "code"
    assert payload["selected_ids"] == [r.directive_id for r in result.directives]
    top = payload["top_scores"]
    assert 1 <= len(top) <= 5
    assert [t["score"] for t in top] == sorted((t["score"] for t in top), reverse=True)
    # The best ranked candidate is the first directive shown.
    assert top[0]["directive_id"] == result.directives[0].directive_id
    assert top[0]["score"] == pytest.approx(result.directives[0].score, abs=1e-3)


async def test_the_run_never_holds_document_text(loaded: RulesService) -> None:
    result = await loaded.query_directives(TASK, scope="s", include_breadcrumbs=True)
    await loaded.close()
    raw = (await loaded._ctx.store.db.read(_raw_runs))[0][5]
    assert result.directives
    for directive in result.directives:
        assert directive.text not in raw
    assert "argon2" not in raw and "Hash passwords" not in raw


async def test_the_task_is_sanitised_and_truncated(loaded: RulesService) -> None:
    secret = "sk-" + "a1B2c3D4e5" * 4
    task = "Add login\nFAKE LOG LINE\x1b[31m with key " + secret + " " + "x" * 300
    await loaded.query_directives(task, scope="s")
    runs = await loaded.list_query_runs(scope="s")
    recorded = runs[0].payload["task"]
    assert "\n" not in recorded and "\x1b" not in recorded
    assert recorded.startswith("Add login\\nFAKE LOG LINE\\x1b[31m")
    assert secret not in json.dumps(runs[0].payload)
    assert len(recorded) <= 101  # 100 characters and an ellipsis
    assert runs[0].payload["task_chars"] == len(task)


async def test_runs_are_listed_newest_first_per_scope(loaded: RulesService) -> None:
    tasks = ["Add a login endpoint", "Backfill the migrations", "Validate request bodies"]
    for task in tasks:
        await loaded.query_directives(task, scope="s")
    await loaded.upsert_markdown([str(loaded._cwd / "rules")], scope="other")
    await loaded.query_directives("Add a login endpoint", scope="other")
    runs = await loaded.list_query_runs(scope="s")
    assert [r.payload["task"] for r in runs] == tasks[::-1]
    assert [r.run_id for r in runs] == sorted((r.run_id for r in runs), reverse=True)
    assert len(await loaded.list_query_runs(scope="s", limit=2)) == 2
    assert [r.scope for r in await loaded.list_query_runs(scope="other")] == ["other"]


async def test_a_failed_query_records_nothing(loaded: RulesService) -> None:
    from memory_core.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        await loaded.query_directives("   ", scope="s")
    assert await loaded.list_query_runs(scope="s") == []


@asynccontextmanager
async def _writer_held(store: Any) -> AsyncIterator[None]:
    """The store's writer busy in a transaction for the body of the ``with`` (released, and
    the transaction finished, when it ends)."""
    holding, release = threading.Event(), threading.Event()

    def hold_the_writer(tx: Any) -> None:
        holding.set()
        release.wait(10)

    async with anyio.create_task_group() as group:
        group.start_soon(store.write, hold_the_writer)
        await anyio.to_thread.run_sync(holding.wait, 10)
        try:
            yield
        finally:
            release.set()


async def test_a_busy_writer_delays_the_record_not_the_query(loaded: RulesService) -> None:
    store = loaded._ctx.store
    recorder = RunRecorder(store, wait_s=0.01)
    async with _writer_held(store):
        # Returns although the writer is busy; the run waits in the queue.
        await recorder.record(Scope.of("s"), "2026-01-01T00:00:00+00:00", 1.5, {"task": "t"})
        assert recorder.queued == 1
    runs = await recorder.list(Scope.of("s"), 10)
    assert [(r.took_ms, r.payload) for r in runs] == [(1.5, {"task": "t"})]
    assert recorder.queued == 0
    await recorder.flush()  # nothing left: no duplicate
    assert len(await recorder.list(Scope.of("s"), 10)) == 1


async def test_old_runs_are_pruned(loaded: RulesService) -> None:
    def insert(tx: Any, count: int) -> None:
        for n in range(count):
            record_query_run(tx, Scope.of("p"), f"2026-01-01T00:00:{n:02d}", 1.0, {}, keep=5)

    await loaded._ctx.store.write(lambda tx: insert(tx, 200))
    kept = await loaded._ctx.store.read(
        lambda tx: tx.log.runs(Scope.of("p"), kinds=(QUERY_RUN_KIND,), limit=1000)
    )
    # Pruning runs every 100th insert and then keeps the newest five.
    assert len(kept) == 5
    assert kept[0].run_id == max(r.run_id for r in kept)


async def test_concurrent_queries_record_one_run_each(loaded: RulesService) -> None:
    tasks = [f"Add a login endpoint for tenant {n}" for n in range(10)]
    async with anyio.create_task_group() as group:
        for task in tasks:
            group.start_soon(lambda t=task: loaded.query_directives(t, scope="s"))
    runs = await loaded.list_query_runs(scope="s", limit=100)
    assert sorted(r.payload["task"] for r in runs) == sorted(tasks)


async def test_recording_a_run_never_waits_for_the_writer(loaded: RulesService) -> None:
    store = loaded._ctx.store
    # However long it would be allowed to wait, the record returns while the writer is held.
    recorder = RunRecorder(store, wait_s=60)
    async with _writer_held(store):
        with anyio.fail_after(5):
            await recorder.record(Scope.of("s"), "2026-01-01T00:00:00+00:00", 1.5, {"task": "t"})
            await recorder.record(Scope.of("s"), "2026-01-01T00:00:01+00:00", 2.5, {"task": "u"})
        assert recorder.queued == 2
    await recorder.close()
    assert recorder.queued == 0
    runs = await store.read(
        lambda tx: tx.log.runs(Scope.of("s"), kinds=(QUERY_RUN_KIND,), limit=10)
    )
    assert sorted(r.took_ms for r in runs) == [1.5, 2.5]


async def test_a_query_run_is_written_without_being_listed(loaded: RulesService) -> None:
    await loaded.query_directives(TASK, scope="s")
    # Nothing else touches the recorder: the background write alone puts the run in the table.
    with anyio.fail_after(10):
        while not await loaded._ctx.store.db.read(_raw_runs):
            await anyio.sleep(0.01)


async def test_closing_the_facade_writes_the_queued_runs(project: Path) -> None:
    memoir = await open_memoir(project)
    try:
        await memoir.embedder.ensure_loaded()
        await memoir.rules.upsert_markdown(
            [str(project / "rules")], scope="s", allowed_roots=[str(project)]
        )
        for n in range(3):
            await memoir.rules.query_directives(f"{TASK} {n}", scope="s")
    finally:
        await memoir.close()
    with sqlite3.connect(project / "memoir.db") as conn:
        tasks = [row[0] for row in conn.execute("SELECT json_extract(payload, '$.task') FROM run")]
    assert sorted(tasks) == [f"{TASK} {n}" for n in range(3)]


async def test_closing_the_facade_writes_runs_before_the_store_shuts(project: Path) -> None:
    # In memory, the reader is the writer: closing the store queues its close on the writer
    # thread before a background write still to start could, so only the facade waiting
    # for the recorder gets the runs out.
    settings = load_settings(None, cwd=project, environ={})
    memoir = await Memoir.open(
        "sqlite:///:memory:", settings=settings, embedder=create_embedder("hash:384")
    )
    try:
        await memoir.embedder.ensure_loaded()
        await memoir.rules.upsert_markdown(
            [str(project / "rules")], scope="s", allowed_roots=[str(project)]
        )
        for n in range(3):
            await memoir.rules.query_directives(f"{TASK} {n}", scope="s")
    finally:
        await memoir.close()
    assert memoir.rules._runs.queued == 0


async def test_runs_recorded_close_together_go_out_in_one_write(loaded: RulesService) -> None:
    store = loaded._ctx.store
    recorder = RunRecorder(store, batch_s=60)
    for n in range(3):
        await recorder.record(
            Scope.of("s"), f"2026-01-01T00:00:0{n}+00:00", float(n), {"task": str(n)}
        )
    await anyio.wait_all_tasks_blocked()
    listed = await store.read(
        lambda tx: tx.log.runs(Scope.of("s"), kinds=(QUERY_RUN_KIND,), limit=10)
    )
    # The background write waits for more runs before its one transaction...
    assert (listed, recorder.queued) == ([], 3)
    # ... and closing ends that wait instead of sitting it out.
    with anyio.fail_after(5):
        await recorder.close()
    listed = await store.read(
        lambda tx: tx.log.runs(Scope.of("s"), kinds=(QUERY_RUN_KIND,), limit=10)
    )
    assert sorted(r.took_ms for r in listed) == [0.0, 1.0, 2.0]
