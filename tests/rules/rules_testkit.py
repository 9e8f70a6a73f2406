"""Helpers the rules tests import by name (a module of its own: ``from conftest import``
resolves to whichever test folder's conftest Python finds first on ``sys.path``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.service import Memoir

__all__ = ["open_memoir", "write_rules"]


def write_rules(root: Path, docs: dict[str, str]) -> list[Path]:
    paths = []
    for name, text in docs.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


async def open_memoir(root: Path, spec: str = "hash:384", **overrides: Any) -> Memoir:
    settings = load_settings(overrides or None, cwd=root, environ={})
    return await Memoir.open(
        f"sqlite:///{root / 'memoir.db'}", settings=settings, embedder=create_embedder(spec)
    )
