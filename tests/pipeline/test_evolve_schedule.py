"""The internal schedule of evolve (seed 004 §6.1 "or scheduled internally"), on every backend:
every N memorizes of a scope and/or a minimum interval, counted from the run log, run through
the service's runner and logged as an evolve run, never twice at once for one scope.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import ConfigError
from memory_core.pipeline.contract import (
    ExecuteStep,
    Pipeline,
    RunOutcome,
    State,
    StepSpec,
    SyncRunner,
)
from memory_core.pipeline.editing import step
from memory_core.pipeline.evolve_schedule import EvolveSchedule, RunLogTail, evolve_due
from memory_core.pipeline.layer_file import open_layer_file
from memory_core.pipeline.service import MemoryService
from memory_core.pipeline.steps import LLMHandle, StepContext
from memory_core.storage.layer import RunRow
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, BOB, CATEGORIES, OrgScope

FACTS = [
    "I always prefer dark roast coffee in the morning.",
    "We must migrate the billing service before the summer release.",
    "I am allergic to peanuts and avoid them at team lunches.",
    "Our stack uses PostgreSQL and Python for every new service.",
    "The quarterly budget review is in the third week of March.",
]


def _evolves(service: MemoryService) -> list[dict[str, Any]]:
    return [run for run in service.runs(200) if run["kind"] == "evolve"]


def test_every_n_memorizes_of_a_scope_run_its_evolve_through_the_runner_and_log_it(
    make_service: ServiceFactory,
) -> None:
    service = make_service(evolve_schedule={"every_memorizes": 2})
    first = service.memorize(ALICE, content=FACTS[0])
    assert first.scheduled_evolve == {
        "status": "not_due",
        "reason": "1 of 2 memorizes since the last evolve",
    }
    bob = service.memorize(BOB, content=FACTS[1])  # another scope counts on its own
    assert bob.scheduled_evolve is not None and bob.scheduled_evolve["status"] == "not_due"
    assert service.memorize(ALICE, content=FACTS[0]).duplicate  # stores nothing, counts nothing
    second = service.memorize(ALICE, content=FACTS[2])
    assert second.scheduled_evolve is not None
    assert second.scheduled_evolve["status"] == "ok", second.scheduled_evolve
    [evolve] = _evolves(service)
    assert evolve["run_id"] == second.scheduled_evolve["run_id"]
    assert evolve["status"] == "ok" and evolve["runner"] == "sync"
    assert evolve["scope_range"] == ALICE
    assert evolve["input"] == {
        "scope": ALICE,
        "trigger": "schedule",
        "after_memorize": second.run_id,
    }
    assert evolve["steps"][0]["step_id"] == "select_targets"
    # the count starts again after it, and after an external evolve too
    third = service.memorize(ALICE, content=FACTS[3])
    assert third.scheduled_evolve == {
        "status": "not_due",
        "reason": "1 of 2 memorizes since the last evolve",
    }
    service.evolve(ALICE)
    fourth = service.memorize(ALICE, content=FACTS[4])
    assert fourth.scheduled_evolve is not None and fourth.scheduled_evolve["status"] == "not_due"
    assert len(_evolves(service)) == 2
    assert service.meta["evolve_schedule"] == {
        "every_memorizes": 2,
        "min_interval_s": None,
        "scan_runs": 500,
    }


def test_a_minimum_interval_holds_the_evolve_back_until_it_has_passed(
    make_service: ServiceFactory,
) -> None:
    now = [1_000_000.0]
    service = make_service(evolve_schedule={"min_interval_s": 600}, clock=lambda: now[0])
    first = service.memorize(ALICE, content=FACTS[0])
    assert first.scheduled_evolve is not None and first.scheduled_evolve["status"] == "ok"
    now[0] += 10
    held = service.memorize(ALICE, content=FACTS[1])
    assert held.scheduled_evolve == {
        "status": "not_due",
        "reason": "10 s of 600 s since the last evolve",
    }
    now[0] += 700
    late = service.memorize(ALICE, content=FACTS[2])
    assert late.scheduled_evolve is not None and late.scheduled_evolve["status"] == "ok"
    assert len(_evolves(service)) == 2


def test_the_count_is_read_from_the_store_so_another_service_on_it_continues_it(
    make_service: ServiceFactory,
) -> None:
    schedule = {"every_memorizes": 3}
    first = make_service(evolve_schedule=schedule)
    for fact in FACTS[:2]:
        first.memorize(ALICE, content=fact)
    reopened = make_service(evolve_schedule=schedule)  # a new process, as the CLI is
    third = reopened.memorize(ALICE, content=FACTS[2])
    assert third.scheduled_evolve is not None and third.scheduled_evolve["status"] == "ok"
    assert len(_evolves(reopened)) == 1


def test_an_evolve_of_a_scope_never_runs_twice_at_once(make_service: ServiceFactory) -> None:
    entered = threading.Event()
    release = threading.Event()

    def gate(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
        if state["scope"] == ALICE:  # holds alice's evolves until the test releases them
            entered.set()
            assert release.wait(30), "the test never released the gate"
        return {}

    service = make_service(evolve_schedule={"every_memorizes": 1}, steps={"gate": gate})
    service.insert_before("select_targets", step("gate", "gate", "check", ["scope"]))
    outside = threading.Thread(target=service.evolve, args=(ALICE,))
    outside.start()
    try:
        assert entered.wait(30), "the external evolve never started"
        busy = service.memorize(ALICE, content=FACTS[0])
        other = service.memorize(BOB, content=FACTS[1])  # another scope is not held back
        assert busy.scheduled_evolve == {
            "status": "skipped",
            "reason": "an evolve of this scope is running",
        }
    finally:
        release.set()
        outside.join(30)
    assert not outside.is_alive()
    assert other.scheduled_evolve is not None and other.scheduled_evolve["status"] == "ok"
    after = service.memorize(ALICE, content=FACTS[2])
    assert after.scheduled_evolve is not None and after.scheduled_evolve["status"] == "ok"
    assert [run["scope_range"] for run in _evolves(service)] == [ALICE, ALICE, BOB]


def test_a_failing_scheduled_evolve_is_logged_and_the_memorize_stands(
    make_service: ServiceFactory,
) -> None:
    def broken(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
        raise RuntimeError("re-cluster blew up")

    service = make_service(evolve_schedule={"every_memorizes": 1}, steps={"broken": broken})
    service.insert_before("select_targets", step("broken", "broken", "check", ["scope"]))
    result = service.memorize(ALICE, content=FACTS[0])
    assert result.items_added
    report = result.scheduled_evolve
    assert report is not None and report["status"] == "failed"
    assert "re-cluster blew up" in report["reason"]
    [evolve] = _evolves(service)
    assert (evolve["run_id"], evolve["status"]) == (report["run_id"], "failed")
    # a failed evolve does not reset the count: the next memorize tries again
    again = service.memorize(ALICE, content=FACTS[1])
    assert again.scheduled_evolve is not None and again.scheduled_evolve["status"] == "failed"


class _EvolveEngineDown(SyncRunner):
    """A runner whose engine is unreachable for evolve runs (as a durable runner's server can
    be): its failure is no step's, so no PipelineRunError carries it."""

    def run(self, pipeline: Pipeline, state: State, execute_step: ExecuteStep) -> RunOutcome:
        if pipeline.name == "evolve":
            raise ConnectionError("the workflow engine at localhost:7233 is unreachable")
        return super().run(pipeline, state, execute_step)


def test_a_scheduled_evolve_failing_outside_its_steps_is_reported_and_the_memorize_returns(
    make_service: ServiceFactory,
) -> None:
    service = make_service(evolve_schedule={"every_memorizes": 1}, runner=_EvolveEngineDown())
    result = service.memorize(ALICE, content=FACTS[0])
    assert result.items_added and not result.duplicate
    assert result.scheduled_evolve == {
        "status": "failed",
        "run_id": None,
        "reason": "ConnectionError: the workflow engine at localhost:7233 is unreachable",
    }
    assert [run["kind"] for run in service.runs(10)] == ["memorize"]  # stored, no evolve logged
    hits = service.retrieve(ALICE, "what coffee does she prefer?")
    assert any("dark roast" in item["text"] for item in hits.items)
    # the lease and the lock were let go: an evolve of the scope runs once the engine is back
    service.runner = SyncRunner()
    assert service.evolve(ALICE).run_id


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({}, "neither every_memorizes nor min_interval_s"),
        ({"every_memorizes": 0}, "every_memorizes must be positive"),
        ({"every_memorizes": 2, "every": 3}, r"unknown keys \['every'\]"),
        ({"min_interval_s": "soon"}, "not a number"),
    ],
)
def test_a_bad_schedule_is_refused_naming_the_setting(
    schedule: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        MemoryService.create(
            scope_model=OrgScope,
            categories=CATEGORIES,
            embedder="hash:64",
            evolve_schedule=schedule,
        )


def test_the_layer_file_sets_the_schedule(tmp_path: Path) -> None:
    layer = tmp_path / "memoir-layer.toml"
    layer.write_text(
        'store = "layer.db"\nscope_fields = ["org_id", "user_id"]\ncategories = ["Work"]\n'
        'embedder = "hash:64"\nallowed_roots = ["."]\n'
        "evolve_schedule = { every_memorizes = 1 }\n",
        encoding="utf-8",
    )
    service = open_layer_file(layer)
    try:
        result = service.memorize(ALICE, content=FACTS[1])
        assert result.scheduled_evolve is not None
        assert result.scheduled_evolve["status"] == "ok"
    finally:
        service.close()


def _log(*entries: tuple[str, dict[str, str], float]) -> list[RunRow]:
    """Run log rows, newest first, from (kind, scope, created_at)."""
    return [
        RunRow(f"r{n}", kind, {"scope_range": scope, "status": "ok"}, at)
        for n, (kind, scope, at) in enumerate(entries)
    ]


def test_the_count_stops_at_the_scopes_last_evolve_and_at_the_tail_read() -> None:
    # newest first: 3 of alice's memorizes among 100 of bob's, then alice's evolve
    entries = [("memorize", BOB, 1000.0 - n) for n in range(100)]
    for at in (0, 40, 90):
        entries[at] = ("memorize", ALICE, 1000.0 - at)
    log = _log(*entries, ("evolve", ALICE, 800.0), ("memorize", ALICE, 700.0))
    check = evolve_due(EvolveSchedule(every_memorizes=5), log, ALICE, now=1000.0)
    assert (check.due, check.memorizes, check.since_evolve_s) == (False, 3, 200.0)
    # past what was read (scan_runs) the older evolve is not seen: the count stops there
    capped = evolve_due(EvolveSchedule(every_memorizes=5), log[:50], ALICE, now=1000.0)
    assert (capped.due, capped.memorizes, capped.since_evolve_s) == (False, 2, None)
    interval = evolve_due(EvolveSchedule(min_interval_s=100), log, ALICE, now=1000.0)
    assert (interval.due, interval.since_evolve_s) == (
        True,
        None,
    )  # alice's evolve ran 200 s back: enough


def test_the_tail_of_the_log_is_topped_up_with_only_what_is_new() -> None:
    log = _log(*[("memorize", BOB, 1000.0 - n) for n in range(300)])
    asked: list[int] = []

    def read(limit: int) -> list[RunRow]:
        asked.append(limit)
        return log[:limit]

    tail = RunLogTail(200)
    assert tail.read(read) == log[:200] and asked == [200]
    asked.clear()
    log[:0] = _log(("memorize", ALICE, 1001.0), ("evolve", ALICE, 1002.0))[::-1]
    for n, row in enumerate(log[:2]):
        row.run_id = f"new{n}"
    assert tail.read(read) == log[:200] and asked == [4]
    asked.clear()
    log[:0] = [RunRow(f"burst{n}", "memorize", {}, 2000.0 + n) for n in range(70)][::-1]
    assert tail.read(read) == log[:200] and asked == [4, 16, 64, 200]
