"""docs/memory-layer-acceptance.md names only tests and files that exist."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "memory-layer-acceptance.md"


def _references(text: str) -> list[tuple[str, str | None]]:
    """(test file, test name or None) for every backticked reference; a bare ``::name`` belongs to
    the last file named before it."""
    refs: list[tuple[str, str | None]] = []
    current: str | None = None
    for token in re.findall(r"`([^`]+)`", text):
        match = re.fullmatch(
            r"((?:pipeline|pipeline_runners|server)/[\w/]+\.py)?(?:::(\w+))?", token
        )
        if not match or not any(match.groups()):
            continue
        path, name = match.groups()
        if path:
            current = path
        if current is not None:
            refs.append((current, name))
    return refs


def test_every_test_the_acceptance_matrix_names_exists() -> None:
    refs = _references(DOC.read_text(encoding="utf-8"))
    assert len(refs) > 100
    missing = []
    for path, name in refs:
        file = REPO / "tests" / path
        if not file.is_file():
            missing.append(path)
        elif name and not re.search(rf"^(async )?def {name}\(", file.read_text(), re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert missing == []
