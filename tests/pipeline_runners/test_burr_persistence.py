"""Burr's persisted state: readable after a run by its app id, and a failed run resumes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from runner_toys import SEVEN_STEPS, SEVEN_STEPS_INPUT, SEVEN_STEPS_OUTPUT, STEPS, executor

from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.pipeline.contract import Pipeline
from memory_core.pipeline.runners.burr_runner import BurrRunner


def test_the_final_state_is_persisted_and_readable_by_a_new_runner(tmp_path: Path) -> None:
    outcome = BurrRunner(tmp_path / "state.db").run(
        SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor()
    )
    assert outcome.run_id is not None

    reopened = BurrRunner(tmp_path / "state.db")
    saved = reopened.persisted("memorize", outcome.run_id)

    assert saved is not None
    assert (saved.status, saved.position) == ("completed", "score")
    assert saved.state == SEVEN_STEPS_OUTPUT
    assert reopened.app_ids("memorize") == [outcome.run_id]
    assert reopened.app_ids("retrieve") == []


def test_a_folder_gets_the_state_file_inside_it(tmp_path: Path) -> None:
    runner = BurrRunner(tmp_path / "store")

    runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())

    assert runner.state_path == tmp_path / "store" / "burr_state.db"
    assert runner.state_path.is_file()


def _breaking_at_count() -> Pipeline:
    steps = tuple(
        dataclasses.replace(s, impl="broken_count") if s.step_id == "count" else s
        for s in SEVEN_STEPS.steps
    )
    return Pipeline("memorize", steps)


def test_a_failed_run_is_saved_before_the_failed_step_and_resumes_there(tmp_path: Path) -> None:
    def broken(state: object, config: object) -> dict[str, object]:
        raise ConnectionError("model offline")

    runner = BurrRunner(tmp_path)
    pipeline = _breaking_at_count()
    failed = runner.run(pipeline, dict(SEVEN_STEPS_INPUT), executor({"broken_count": broken}))
    assert failed.status == "failed" and failed.failed_step == "count"
    assert failed.run_id is not None

    saved = runner.persisted("memorize", failed.run_id)
    assert saved is not None
    assert (saved.status, saved.position) == ("failed", "count")
    assert set(saved.state) == {"raw", "text", "tokens"}

    repaired = executor({"broken_count": STEPS["count"]})
    resumed = runner.resume(pipeline, failed.run_id, repaired)

    assert resumed.status == "ok", resumed.error
    assert resumed.state == SEVEN_STEPS_OUTPUT
    assert [t.step_id for t in resumed.timings] == ["count", "top", "keys_seen", "summary", "score"]
    assert runner.persisted("memorize", failed.run_id).status == "completed"  # type: ignore[union-attr]


def test_resuming_a_completed_run_runs_nothing(tmp_path: Path) -> None:
    runner = BurrRunner(tmp_path)
    done = runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())
    assert done.run_id is not None

    again = runner.resume(SEVEN_STEPS, done.run_id, executor({"normalize": None}))  # type: ignore[dict-item]

    assert (again.status, again.state, again.timings) == ("ok", SEVEN_STEPS_OUTPUT, [])


def test_resuming_an_unknown_run_names_it(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no Burr run 'nope' of pipeline 'memorize'"):
        BurrRunner(tmp_path).resume(SEVEN_STEPS, "nope", executor())


def test_resuming_at_a_step_the_pipeline_no_longer_has_is_refused(tmp_path: Path) -> None:
    runner = BurrRunner(tmp_path)
    pipeline = _breaking_at_count()
    failed = runner.run(pipeline, dict(SEVEN_STEPS_INPUT), executor())  # no broken_count impl
    assert failed.failed_step == "count" and failed.run_id is not None
    without_count = Pipeline("memorize", tuple(s for s in pipeline.steps if s.step_id != "count"))

    with pytest.raises(InvalidInputError, match="stopped at step 'count', which pipeline"):
        runner.resume(without_count, failed.run_id, executor())


def test_a_closed_runner_reopens_its_state_file_on_the_next_run(tmp_path: Path) -> None:
    runner = BurrRunner(tmp_path)
    first = runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())
    runner.close()

    second = runner.run(SEVEN_STEPS, dict(SEVEN_STEPS_INPUT), executor())

    assert set(runner.app_ids("memorize")) == {first.run_id, second.run_id}
