"""Fixtures for the rules feature: real SQLite stores in tmp_path, hash or local embedders."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rule_texts import AUTH_RULE, MIGRATION_RULE, VALIDATION_RULE, WILDCARD_RULE
from rules_testkit import open_memoir, write_rules

from memory_core.rules.service import RulesService
from memory_core.service import Memoir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)  # makes it a project root for default allowed roots
    write_rules(
        root / "rules",
        {
            "auth.md": AUTH_RULE,
            "api-validation.md": VALIDATION_RULE,
            "migrations.md": MIGRATION_RULE,
            "logging.md": WILDCARD_RULE,
        },
    )
    return root


@pytest.fixture
async def memoir(project: Path) -> AsyncIterator[Memoir]:
    store = await open_memoir(project)
    await store.embedder.ensure_loaded()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def service(memoir: Memoir, project: Path) -> AsyncIterator[RulesService]:
    service = RulesService(memoir.context, cwd=project)
    yield service
    await service.close()  # query runs are written in the background


@pytest.fixture
async def loaded(service: RulesService, project: Path) -> RulesService:
    report = await service.upsert_markdown([str(project / "rules")], scope="s")
    assert report.documents_failed == 0
    return service


@pytest.fixture(autouse=True)
def _default_structlog() -> None:
    # The CLI tests configure structlog at "warning"; log assertions need every level.
    import structlog

    structlog.reset_defaults()
