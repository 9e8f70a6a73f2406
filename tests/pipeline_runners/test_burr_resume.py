"""A Burr run whose process dies after a step is finished by a new process's service from the
state Burr saved: only the steps after the last saved one run, on the run's own pipeline
revision (even if the pipeline was edited since), and the store ends as after an uninterrupted
run. The resume tests run on a SQLite file and on a PostgreSQL schema (the dead process and the
new one open the same store; an in-memory store dies with its process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from resume_kit import (
    SHARED_BACKENDS,
    STOP_AFTER,
    StepLog,
    audit,
    edit_in_flight,
    layer_service,
    logged_steps,
    metadata_store,
    stored,
    uninterrupted_memorize,
)

from memory_core.errors import ConfigError, NotFoundError, PipelineRunError
from memory_core.pipeline.contract import SyncRunner
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.steps import BUILTIN_STEPS, StepFn
from tests.pipeline.layer_kit import ALICE, BOB, CATEGORIES, CHAT
from tests.pipeline_runners.conftest import StoreFactory

REPO = Path(__file__).resolve().parents[2]
DIES = 17

# The first process: memorize on the Burr runner, and die (no clean-up, no failure saved) in
# the step after STOP_AFTER, as a killed worker would.
FIRST_PROCESS = f"""
import json, os, sys
from pathlib import Path
from resume_kit import STOP_AFTER, StepLog, layer_service, logged_steps
from memory_core.pipeline.runners.burr_runner import BurrRunner
from tests.pipeline.layer_kit import ALICE, CHAT

folder = Path(sys.argv[1])
stopping = []

def after_step(step_id):
    if stopping:
        os._exit({DIES})
    if step_id == STOP_AFTER:
        stopping.append(step_id)

store = json.loads(sys.argv[2])
service = layer_service(store, BurrRunner(folder), logged_steps(StepLog(), "p1", after_step))
service.memorize(ALICE, conversation=CHAT)
"""


def _die_after_stop_step(folder: Path, store: Any) -> None:
    script = folder / "first_process.py"
    script.write_text(FIRST_PROCESS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests" / "pipeline_runners")])
    done = subprocess.run(
        [sys.executable, str(script), str(folder), json.dumps(metadata_store(store))],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == DIES, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("backend", SHARED_BACKENDS)
def test_a_burr_run_whose_process_died_resumes_in_a_new_service(
    tmp_path: Path, backend: str, fresh_store: StoreFactory
) -> None:
    reference = uninterrupted_memorize(fresh_store(backend))
    store = fresh_store(backend)
    _die_after_stop_step(tmp_path, store)
    runner = BurrRunner(tmp_path)
    (app_id,) = runner.app_ids("memorize")
    saved = runner.persisted("memorize", app_id)
    assert saved is not None and (saved.status, saved.position) == ("completed", STOP_AFTER)
    log = StepLog()
    service = layer_service(store, runner, logged_steps(log, "p2"))
    try:
        order = [s.step_id for s in service.pipeline("memorize").enabled_steps()]
        rest = order[order.index(STOP_AFTER) + 1 :]

        entry = service.resume("memorize", app_id)

        assert log.steps() == rest, "only the steps after the last saved one ran"
        assert (entry["status"], entry["runner_run_id"]) == ("ok", app_id)
        assert entry["input"] == {"resumed": app_id}
        assert [s["step_id"] for s in entry["steps"]] == rest
        assert entry["output"]["items_added"] == len(reference["result"][0])
        assert stored(service) == {k: v for k, v in reference.items() if k != "result"}
        assert runner.persisted("memorize", app_id).status == "completed"  # type: ignore[union-attr]
        assert service.resume("memorize", app_id) == entry  # done: nothing runs, nothing logged
        assert len(service.runs()) == 1
    finally:
        service.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", SHARED_BACKENDS)
def test_a_resumed_burr_run_keeps_the_revision_it_started_on(
    tmp_path: Path, backend: str, fresh_store: StoreFactory
) -> None:
    store = fresh_store(backend)
    _die_after_stop_step(tmp_path, store)
    runner = BurrRunner(tmp_path)
    (app_id,) = runner.app_ids("memorize")
    log = StepLog()
    steps = {**logged_steps(log, "p2"), "audit": audit}
    service = layer_service(store, runner, steps)
    try:
        edit_in_flight(service)
        assert service.pipeline_revision == 3

        entry = service.resume("memorize", app_id)

        assert entry["status"] == "ok" and entry["pipeline_revision"] == 1
        assert "audit" not in log.steps() and log.steps()[-1] == "persist_index"
        assert "edited_in_flight" not in log.configs["dedupe_merge"]
    finally:
        service.close()


def test_resume_names_what_is_missing(tmp_path: Path) -> None:
    burr = layer_service(tmp_path / "layer.db", BurrRunner(tmp_path))
    with pytest.raises(NotFoundError, match="saved no memorize run 'nope'"):
        burr.resume("memorize", "nope")
    burr.close()
    sync = layer_service(tmp_path / "layer.db", SyncRunner())
    with pytest.raises(ConfigError, match="the 'sync' runner keeps no run state"):
        sync.resume("memorize", "nope")
    sync.close()


def test_resume_is_idempotent_it_logs_a_finished_run_once(tmp_path: Path) -> None:
    failures = ["categorize_items"]  # the first call of this step fails, later ones run

    def flaky(fn: StepFn) -> StepFn:
        def run(ctx: Any, spec: Any, state: Any, llm: Any) -> Any:
            if failures and spec.step_id == failures[0]:
                failures.pop()
                raise RuntimeError("the classifier is unreachable")
            return fn(ctx, spec, state, llm)

        return run

    steps = {impl: flaky(fn) for impl, fn in BUILTIN_STEPS.items()}
    service = layer_service(tmp_path / "layer.db", BurrRunner(tmp_path), steps)
    try:
        with pytest.raises(PipelineRunError):
            service.memorize(ALICE, conversation=CHAT)
        (failed,) = service.runs()
        app_id = failed["runner_run_id"]

        first = service.resume("memorize", app_id)
        again = service.resume("memorize", app_id)
        third = service.resume("memorize", app_id)

        assert first["status"] == "ok" and first["input"] == {"resumed": app_id}
        assert again == first and third == first, "the finished run's entry, unchanged"
        assert [r["run_id"] for r in service.runs()] == [first["run_id"], failed["run_id"]]

        done = service.memorize(BOB, conversation=CHAT)  # a run its caller logged as ok
        (logged,) = [r for r in service.runs() if r["run_id"] == done.run_id]
        assert service.resume("memorize", logged["runner_run_id"]) == logged
        assert len(service.runs()) == 3
    finally:
        service.close()


LAYER_FILE = """
store = "layer.db"
scope_fields = ["org_id", "user_id"]
boundary_fields = ["org_id"]
embedder = "hash:256"
categories = {categories}

[runner]
name = "burr"
"""


def _memoir(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _toml_tables(rows: list[dict[str, str]]) -> str:
    tables = (", ".join(f"{k} = {json.dumps(v)}" for k, v in row.items()) for row in rows)
    return "[" + ", ".join(f"{{ {t} }}" for t in tables) + "]"


@pytest.mark.slow
def test_memoir_pipeline_resume_finishes_a_dead_processs_run_once(tmp_path: Path) -> None:
    """The CLI on a layer file naming the same store and Burr state as the dead process."""
    reference = uninterrupted_memorize(tmp_path / "baseline.db")
    _die_after_stop_step(tmp_path, tmp_path / "layer.db")
    (app_id,) = BurrRunner(tmp_path).app_ids("memorize")
    (tmp_path / "memoir-layer.toml").write_text(
        LAYER_FILE.format(categories=_toml_tables(CATEGORIES))
    )

    done = _memoir("pipeline", "resume", "memorize", app_id, "--json", cwd=tmp_path)
    again = _memoir("pipeline", "resume", "memorize", app_id, cwd=tmp_path)
    unknown = _memoir("pipeline", "resume", "memorize", "nope", cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    entry = json.loads(done.stdout)["run"]
    assert (entry["status"], entry["runner_run_id"], entry["input"]) == (
        "ok", app_id, {"resumed": app_id},
    )  # fmt: skip
    order = [s["step_id"] for s in entry["steps"]]
    assert order[0] != "ingest_resource" and order[-1] == "persist_index", "only the rest ran"
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"memorize run {app_id}: ok" in again.stdout
    assert f"(run log {entry['run_id']})" in again.stdout, "the same entry: logged once"
    assert (
        unknown.returncode != 0
        and "saved no memorize run 'nope'" in unknown.stdout + unknown.stderr
    )
    service = layer_service(tmp_path / "layer.db", SyncRunner())
    try:
        assert [r["run_id"] for r in service.runs()] == [entry["run_id"]]
        assert stored(service) == {k: v for k, v in reference.items() if k != "result"}
    finally:
        service.close()
