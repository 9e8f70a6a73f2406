"""Fixtures for the rules feature: real SQLite stores in tmp_path, hash or local embedders."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rule_texts import AUTH_RULE, MIGRATION_RULE, VALIDATION_RULE, WILDCARD_RULE

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.rules.service import RulesService
from memory_core.service import Memoir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write_rules(root: Path, docs: dict[str, str]) -> list[Path]:
    paths = []
    for name, text in docs.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


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


async def open_memoir(root: Path, spec: str = "hash:384", **overrides: Any) -> Memoir:
    settings = load_settings(overrides or None, cwd=root, environ={})
    return await Memoir.open(
        f"sqlite:///{root / 'memoir.db'}", settings=settings, embedder=create_embedder(spec)
    )


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
