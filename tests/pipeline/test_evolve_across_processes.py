"""A scope's scheduled evolve runs once across processes on one store (SQLite file, PostgreSQL):
the lease in the store, not the per-process lock, keeps the second process out. Real processes
(spawned, so nothing is shared but the store and the test's events), real stores.
"""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import DatabaseLockedError
from memory_core.pipeline.editing import step
from memory_core.pipeline.evolve_schedule import ScopeLeases
from memory_core.storage.layer import open_layer_store
from tests.pipeline import layer_processes
from tests.pipeline.conftest import fresh_pg_schema
from tests.pipeline.layer_kit import ALICE
from tests.pipeline.layer_processes import memorize_in_a_process, open_gated

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def shared_location(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "postgres":
        return {
            "provider": "postgres",
            "url": fresh_pg_schema(request.getfixturevalue("pg_admin_url")),
        }
    return {"provider": "sqlite", "path": str(tmp_path / "layer.db")}


def test_two_processes_due_at_once_run_one_scheduled_evolve_of_the_scope(
    shared_location: dict[str, Any],
) -> None:
    setup = open_gated(shared_location)
    setup.insert_before("select_targets", step("gate", "gate", "check", ["scope"]))
    setup.close()
    entered: Event = SPAWN.Event()
    release: Event = SPAWN.Event()
    gate = {"entered": entered, "release": release, "entries": SPAWN.Value("i", 0)}
    results = SPAWN.Queue()
    first = SPAWN.Process(
        target=memorize_in_a_process,
        args=(shared_location, "I always prefer dark roast coffee.", gate, results),
    )
    second = SPAWN.Process(
        target=memorize_in_a_process,
        args=(shared_location, "We must migrate billing before summer.", gate, results),
    )
    first.start()
    try:
        assert entered.wait(30), "the first process never started its evolve"
        second.start()  # due as well: the first evolve is not logged yet
        skipped = results.get(timeout=30)
        assert skipped == {
            "status": "skipped",
            "reason": "an evolve of this scope is running in another process on this store",
        }
    finally:
        release.set()
        ran = results.get(timeout=30)
        first.join(60)
        second.join(60)
    assert ran is not None and ran["status"] == "ok", ran
    assert (first.exitcode, second.exitcode) == (0, 0)
    assert gate["entries"].value == 1
    store, _ = open_layer_store({"metadata_store": shared_location})
    try:
        evolves = [run for run in store.runs(50) if run.kind == "evolve"]
        memorizes = [run for run in store.runs(50) if run.kind == "memorize"]
    finally:
        store.close()
    assert [run.run_id for run in evolves] == [ran["run_id"]]
    assert len(memorizes) == 2


def test_a_lease_is_one_holders_until_released_or_expired(
    shared_location: dict[str, Any],
) -> None:
    one, _ = open_layer_store({"metadata_store": shared_location})
    other, _ = open_layer_store({"metadata_store": shared_location})
    try:
        assert one.claim_lease("evolve x", "one", 60)
        assert not other.claim_lease("evolve x", "other", 60)
        assert one.claim_lease("evolve x", "one", 60)  # a renewal
        assert other.claim_lease("evolve y", "other", 60)  # another name is free
        other.release_lease("evolve x", "other")  # not its own: nothing happens
        assert not other.claim_lease("evolve x", "other", 60)
        one.release_lease("evolve x", "one")
        assert other.claim_lease("evolve x", "other", -1)  # claimed, already expired
        assert one.claim_lease("evolve x", "one", 60)  # a crashed holder blocks no one
        assert not other.claim_lease("evolve x", "other", 60)
    finally:
        one.close()
        other.close()


def test_an_external_evolve_waits_for_another_services_lease_and_then_runs(
    shared_location: dict[str, Any],
) -> None:
    # Two services on one store share no lock: only the lease keeps them apart, as two
    # processes are kept apart.
    holder = open_gated(shared_location)
    holder.insert_before("select_targets", step("gate", "gate", "check", ["scope"]))
    entered, release = threading.Event(), threading.Event()
    gate = {"entered": entered, "release": release, "entries": SPAWN.Value("i", 0)}
    layer_processes._GATE.update(gate)
    waiter = open_gated(shared_location)
    waiter._evolve_leases.wait_s = 1.0  # the bound of its wait, short for the test
    running = threading.Thread(target=holder.evolve, args=(ALICE,))
    running.start()
    try:
        assert entered.wait(30), "the first evolve never started"
        with pytest.raises(DatabaseLockedError, match="another process has held the evolve"):
            waiter.evolve(ALICE)
        held_back = waiter.memorize(ALICE, content="We must migrate billing before summer.")
        assert held_back.scheduled_evolve is not None
        assert held_back.scheduled_evolve["status"] == "skipped"
    finally:
        release.set()
        running.join(30)
    assert gate["entries"].value == 1  # the waiter never ran its evolve beside the holder's
    waiter._evolve_leases.wait_s = 30.0
    assert waiter.evolve(ALICE).run_id  # the lease was let go: it runs now
    holder.close()
    waiter.close()


def test_a_live_holder_keeps_its_lease_past_its_ttl_by_renewing_it(
    shared_location: dict[str, Any],
) -> None:
    one, _ = open_layer_store({"metadata_store": shared_location})
    other, _ = open_layer_store({"metadata_store": shared_location})
    try:
        with ScopeLeases(one, ttl_s=0.6).hold(ALICE, wait=False) as held:
            assert held
            # waits 2 s, over three lease lifetimes: only renewals keep the lease the holder's
            with (
                pytest.raises(DatabaseLockedError, match="another process has held"),
                ScopeLeases(other, ttl_s=0.6, wait_s=2.0).hold(ALICE, wait=True),
            ):
                pass
        with ScopeLeases(other, ttl_s=0.6).hold(ALICE, wait=False) as after:
            assert after  # released at the end of the block
    finally:
        one.close()
        other.close()
