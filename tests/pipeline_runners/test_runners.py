"""One suite over the three runners: same states, same run records, same failures."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from runner_toys import (
    SEVEN_STEPS,
    SEVEN_STEPS_INPUT,
    SEVEN_STEPS_OUTPUT,
    Flaky,
    executor,
    step,
)

from memory_core.pipeline.contract import Pipeline, Runner, SyncRunner
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.runners.temporal_runner import TemporalRunner

RUNNERS = ["sync", "burr", "temporal", "temporal_local"]


@pytest.fixture(params=RUNNERS)
def runner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runner]:
    if request.param == "sync":
        yield SyncRunner()
    elif request.param == "burr":
        yield BurrRunner(tmp_path / "burr")
    else:
        yield request.getfixturevalue(f"{request.param}_runner")


def test_every_runner_reaches_the_same_final_state(runner: Runner) -> None:
    outcome = runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())

    assert outcome.status == "ok", outcome.error
    assert outcome.state == SEVEN_STEPS_OUTPUT
    assert outcome.error is None and outcome.failed_step is None


def test_every_runner_times_each_step_in_order(runner: Runner) -> None:
    outcome = runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())

    assert [t.step_id for t in outcome.timings] == [s.step_id for s in SEVEN_STEPS.steps]
    assert all(t.ms >= 0 and t.attempts == 1 and t.error is None for t in outcome.timings)


def test_the_callers_state_is_not_mutated(runner: Runner) -> None:
    given = dict(SEVEN_STEPS_INPUT)

    runner.run(SEVEN_STEPS, given, executor())

    assert given == SEVEN_STEPS_INPUT


def _with_flaky(retries: int) -> Pipeline:
    return Pipeline(
        "memorize",
        (
            step("normalize", produces=frozenset({"text"})),
            step("flaky", retries=retries, produces=frozenset({"flaky_ok"})),
            step("tokenize", produces=frozenset({"tokens"})),
        ),
    )


def test_a_step_that_fails_once_succeeds_on_its_retry(runner: Runner) -> None:
    flaky = Flaky(failures=1)

    outcome = runner.run(
        _with_flaky(retries=1), dict(SEVEN_STEPS_INPUT), executor({"flaky": flaky})
    )

    assert outcome.status == "ok", outcome.error
    assert flaky.calls == 2
    assert outcome.state["flaky_ok"] is True and "tokens" in outcome.state
    assert [(t.step_id, t.attempts, t.error) for t in outcome.timings] == [
        ("normalize", 1, None),
        ("flaky", 2, None),
        ("tokenize", 1, None),
    ]


def test_a_step_failing_past_its_retries_fails_the_run_naming_the_step(runner: Runner) -> None:
    flaky = Flaky(failures=1)

    outcome = runner.run(
        _with_flaky(retries=0), dict(SEVEN_STEPS_INPUT), executor({"flaky": flaky})
    )

    assert outcome.status == "failed"
    assert outcome.failed_step == "flaky"
    assert outcome.error == "step 'flaky' failed: transient failure 1"
    assert flaky.calls == 1
    assert [(t.step_id, t.attempts, t.error) for t in outcome.timings] == [
        ("normalize", 1, None),
        ("flaky", 1, "RuntimeError: transient failure 1"),
    ]
    # The state is the one before the failed step; later steps never ran.
    assert "text" in outcome.state and "tokens" not in outcome.state


def test_retries_are_all_used_before_the_run_fails(runner: Runner) -> None:
    pipeline = Pipeline("memorize", (step("boom", retries=2, config={"message": "always"}),))

    outcome = runner.run(pipeline, {}, executor())

    assert outcome.status == "failed"
    assert outcome.error == "step 'boom' failed: always"
    assert [(t.attempts, t.error) for t in outcome.timings] == [(3, "ValueError: always")]


def test_disabled_steps_are_skipped(runner: Runner) -> None:
    pipeline = Pipeline(
        "retrieve",
        (
            step("normalize", produces=frozenset({"text"})),
            step("boom", enabled=False),
            step("tokenize", produces=frozenset({"tokens"})),
        ),
    )

    outcome = runner.run(pipeline, dict(SEVEN_STEPS_INPUT), executor())

    assert outcome.status == "ok", outcome.error
    assert [t.step_id for t in outcome.timings] == ["normalize", "tokenize"]
    assert outcome.state["tokens"][:2] == ["the", "cat"]


def test_a_pipeline_with_no_enabled_step_returns_its_input(runner: Runner) -> None:
    pipeline = Pipeline("evolve", (step("boom", enabled=False),))

    outcome = runner.run(pipeline, {"a": 1}, executor())

    assert (outcome.status, outcome.state, outcome.timings) == ("ok", {"a": 1}, [])


def test_a_step_past_its_timeout_fails_the_run(runner: Runner) -> None:
    pipeline = Pipeline(
        "memorize",
        (
            step("normalize", produces=frozenset({"text"})),
            step("sleep", timeout_s=0.2, config={"seconds": 1.5}),
            step("tokenize"),
        ),
    )

    outcome = runner.run(pipeline, dict(SEVEN_STEPS_INPUT), executor())

    assert outcome.status == "failed"
    assert outcome.failed_step == "sleep"
    assert outcome.error == "step 'sleep' failed: timed out after 0.2 s (its timeout_s)"
    assert outcome.timings[-1].error == "TimeoutError: timed out after 0.2 s (its timeout_s)"
    assert "tokens" not in outcome.state


def test_a_step_within_its_timeout_gives_its_result(runner: Runner) -> None:
    pipeline = Pipeline("memorize", (step("sleep", timeout_s=5, config={"seconds": 0.05}),))

    outcome = runner.run(pipeline, {}, executor())

    assert (outcome.status, outcome.state) == ("ok", {"slept": 0.05})


# Temporal only: workflow ids, and where the runner can be called from


def test_temporal_runs_are_workflows_named_after_the_pipeline(
    temporal_runner: TemporalRunner,
) -> None:
    outcome = temporal_runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())

    assert outcome.run_id is not None and outcome.run_id.startswith("memoir-memorize-")


def test_temporal_runs_from_inside_a_running_event_loop(temporal_runner: TemporalRunner) -> None:
    async def from_async_code() -> Any:
        return temporal_runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())

    outcome = asyncio.run(from_async_code())

    assert outcome.state == SEVEN_STEPS_OUTPUT


@pytest.mark.slow
def test_temporal_can_start_its_own_dev_server() -> None:
    with TemporalRunner(dev_server=True) as runner:
        assert runner.target.startswith("127.0.0.1:")
        outcome = runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())
    assert outcome.state == SEVEN_STEPS_OUTPUT


def test_concurrent_runs_keep_their_own_state(runner: Runner) -> None:
    inputs = [{"raw": f"word{i} " * (i + 1)} for i in range(6)]

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda s: runner.run(SEVEN_STEPS, s, executor()), inputs))

    assert [o.status for o in outcomes] == ["ok"] * 6
    assert [o.state["counts"] for o in outcomes] == [{f"word{i}": i + 1} for i in range(6)]
