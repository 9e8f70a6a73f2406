"""Fixtures for the MCP server tests (helpers live in ``mcp_testkit``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp_testkit import ServerUnderTest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def sut(tmp_path: Path) -> AsyncIterator[ServerUnderTest]:
    server = ServerUnderTest(tmp_path)
    try:
        yield server
    finally:
        await server.close()
