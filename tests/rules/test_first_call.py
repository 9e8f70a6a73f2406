"""The first query of a session waits (bounded) for the embedding model instead of ranking
lexically, and the session prompt never embeds a degraded block silently."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np
import pytest
from rules_testkit import open_memoir

from memory_core.embed.hashing import HashingEncoder
from memory_core.embed.local import LocalEmbedder
from memory_core.rules.service import RulesService
from server.mcp_app.prompts import session_prompt_text

pytestmark = pytest.mark.anyio

TASK = "Add a login endpoint that creates user sessions"


class _ColdEmbedder(LocalEmbedder):
    """The hashing embedder whose model finishes loading when the test says so."""

    def __init__(self) -> None:
        super().__init__(HashingEncoder(384), embedder_id="hash:384")
        self.ready = False
        self.load_requested = anyio.Event()
        self.loaded = anyio.Event()

    def is_ready(self) -> bool:
        return self.ready

    def start_loading(self) -> None:
        self.load_requested.set()

    async def ensure_loaded(self) -> None:
        await self.loaded.wait()
        self.ready = True

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        await self.ensure_loaded()
        return await super().embed_documents(texts)


async def _loaded_service(project: Path, **rules: object) -> tuple[RulesService, object]:
    memoir = await open_memoir(project, rules=rules) if rules else await open_memoir(project)
    await memoir.embedder.ensure_loaded()
    service = RulesService(memoir.context, cwd=project)
    await service.upsert_markdown([str(project / "rules")], scope="s")
    return service, memoir


async def test_the_first_query_waits_for_the_model_and_ranks_semantically(
    project: Path,
) -> None:
    service, memoir = await _loaded_service(project)
    cold = _ColdEmbedder()
    memoir.context.embedder = cold  # type: ignore[attr-defined]
    results = []

    async def query() -> None:
        results.append(await service.query_directives(TASK, scope="s"))

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(query)
            with anyio.fail_after(10):
                await cold.load_requested.wait()
            cold.loaded.set()  # the model finishes loading while the query waits
    finally:
        await memoir.close()  # type: ignore[attr-defined]
    (result,) = results
    assert result.diagnostics.semantic_available
    assert "semantic ranking unavailable: embedding model loading" not in (
        result.diagnostics.warnings
    )


async def test_the_wait_is_bounded_and_the_degradation_is_reported(project: Path) -> None:
    service, memoir = await _loaded_service(project, embedder_wait_s=0.2)
    memoir.context.embedder = _ColdEmbedder()  # type: ignore[attr-defined]
    try:
        started = time.perf_counter()
        result = await service.query_directives(TASK, scope="s")
        waited = time.perf_counter() - started
    finally:
        await memoir.close()  # type: ignore[attr-defined]
    assert waited >= 0.2
    assert not result.diagnostics.semantic_available
    assert "semantic ranking unavailable: embedding model loading" in result.diagnostics.warnings


def test_the_session_prompt_says_when_its_block_was_ranked_without_the_model() -> None:
    text = session_prompt_text(
        TASK, "## Project rules for this task\n", None, "ranked by keywords only"
    )
    assert "(Note: ranked by keywords only)" in text
