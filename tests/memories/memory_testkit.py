"""Shared helpers of the agent-memory tests (importable by name from its test modules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.service import Memoir

__all__ = ["SPACE", "open_memoir"]

SPACE = "theo"


async def open_memoir(path: Path, *, embedder: Any = None, **memories: Any) -> Memoir:
    """A store at ``path`` with the hashing embedder and ``memories`` settings overrides."""
    overrides: dict[str, Any] = {"memories": memories} if memories else {}
    return await Memoir.open(
        f"sqlite:///{path}",
        settings=load_settings(overrides, cwd=path.parent, environ={}),
        embedder=embedder or create_embedder("hash:384"),
    )
