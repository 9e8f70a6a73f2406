from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.config import Settings, load_settings
from memory_core.embed import create_embedder
from memory_core.service import Memoir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # environ={} keeps the developer's MEMOIR_* variables out of the tests.
    return load_settings(cwd=tmp_path, environ={})


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "memoir.db"


@pytest.fixture
async def memoir(db_path: Path, settings: Settings) -> AsyncIterator[Memoir]:
    opened = await Memoir.open(
        f"sqlite:///{db_path}", settings=settings, embedder=create_embedder("hash:64")
    )
    try:
        yield opened
    finally:
        await opened.close()
