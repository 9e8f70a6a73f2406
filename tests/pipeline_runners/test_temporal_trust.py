"""A Temporal worker runs stored memorize steps for anyone who can start a workflow on its task
queue. What it reads is its own service's configuration (``allowed_roots``), never the
workflow's: an outside client asking it to memorize /etc/passwd, a file outside the roots, or a
symlink leading out of them gets a failed run naming the path, and nothing is stored; a file
inside the roots is memorized. Each test runs on the three stores (in-memory, a SQLite file, a
PostgreSQL schema): "nothing is stored" is read back from the store the worker wrote to."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from memory_core.pipeline.runners.temporal_runner import TemporalRunner
from memory_core.pipeline.runners.temporal_workflow import (
    STORED_WORKFLOW_NAME,
    StoredRunInput,
    StoredRunResult,
)
from memory_core.pipeline.service import MemoryService
from tests.pipeline.layer_kit import ALICE, CATEGORIES, OrgScope
from tests.pipeline_runners.conftest import StoreFactory

ALICE_FILTER = {k: (v,) for k, v in ALICE.items()}


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def worker(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    temporal_address: str,
    fresh_store: StoreFactory,
) -> Iterator[MemoryService]:
    """A service whose Temporal worker polls its own queue and may read `tmp_path/inside`, on
    a fresh store of each backend."""
    (tmp_path / "inside").mkdir()
    runner = TemporalRunner(address=temporal_address, sandboxed=False).start()
    service = MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": fresh_store(request.param)},
        boundary_fields=["org_id"],
        embedder="hash:256",
        runner=runner,
        allowed_roots=[tmp_path / "inside"],
    )
    try:
        yield service
    finally:
        service.close()


def _outside_client_memorize(address: str, queue: str, uri: str) -> tuple[StoredRunResult, str]:
    """What anyone who can reach the server may send: a stored memorize run of a URI (and
    the content hash it claims). Returns the result and that hash."""
    claimed = hashlib.sha256(uri.encode()).hexdigest()
    state: dict[str, Any] = {
        "scope": ALICE,
        "pipeline_revision": 1,
        "options": {},
        "content_hash": claimed,
        "resource_input": {"kind": "file", "uri": uri, "messages": None, "content": None,
                           "mime": "text/plain", "metadata": {}},
    }  # fmt: skip

    async def start() -> StoredRunResult:
        client = await Client.connect(address)
        result: StoredRunResult = await client.execute_workflow(
            STORED_WORKFLOW_NAME,
            StoredRunInput("memorize", 1, state),
            id=f"memoir-outside-{uuid.uuid4().hex}",
            task_queue=queue,
            result_type=StoredRunResult,
        )
        return result

    return asyncio.run(start()), claimed


def _refused_and_nothing_stored(
    worker: MemoryService, result: StoredRunResult, claimed: str, path: str
) -> None:
    assert (result.failed_step, result.error_type) == ("ingest_resource", "PathNotAllowedError")
    message = result.error_message or ""
    assert repr(path) in message, "the path is named"
    assert str(worker.resource_access.roots[0]) in message, "the allowed roots are named"
    assert "allowed_roots" in message, "the setting to change is named"
    assert [t.attempts for t in result.timings if t.step_id == "ingest_resource"] == [1], (
        "a refusal is not retried"
    )
    assert worker.store.find_resource(ALICE, claimed, 1) is None
    assert worker.store.count_items(ALICE_FILTER) == 0


def test_an_outside_client_cannot_make_the_worker_read_etc_passwd(
    worker: MemoryService, temporal_address: str
) -> None:
    queue = worker.runner.task_queue  # type: ignore[attr-defined]

    result, claimed = _outside_client_memorize(temporal_address, queue, "/etc/passwd")

    _refused_and_nothing_stored(worker, result, claimed, "/etc/passwd")


def test_an_outside_client_cannot_read_a_file_outside_the_roots_even_through_a_symlink(
    worker: MemoryService, temporal_address: str, tmp_path: Path
) -> None:
    queue = worker.runner.task_queue  # type: ignore[attr-defined]
    secret = tmp_path / "secret.txt"
    secret.write_text("The vault combination is 31-41-59.\n")
    link = tmp_path / "inside" / "innocent.txt"
    link.symlink_to(secret)

    for path in (str(secret), str(link)):
        result, claimed = _outside_client_memorize(temporal_address, queue, path)
        _refused_and_nothing_stored(worker, result, claimed, path)


def test_a_file_inside_the_roots_is_memorized_by_the_worker(
    worker: MemoryService, temporal_address: str, tmp_path: Path
) -> None:
    queue = worker.runner.task_queue  # type: ignore[attr-defined]
    notes = tmp_path / "inside" / "notes.txt"
    notes.write_text("Our release train ships every second Tuesday from the main branch.\n")

    result, claimed = _outside_client_memorize(temporal_address, queue, str(notes))

    assert result.error_type is None, result.error_message
    assert worker.store.find_resource(ALICE, claimed, 1) is not None
    texts = [i.text for i in worker.store.items(ALICE_FILTER)]
    assert any("release train" in t for t in texts)
