"""Path validation for rule ingestion: no traversal, no symlink escape (Requirement 13.3).

A path is accepted only when its fully resolved location (every symlink followed) lies inside
one of the allowed roots. The path recorded for citations is the one relative to that root,
so the same project ingested from two checkouts cites the same paths.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from memory_core.allowed_paths import resolve_inside
from memory_core.errors import InvalidInputError, PathNotAllowedError

__all__ = ["display_path", "escaping_links", "resolve_allowed", "validate_virtual_path"]

_MAX_LINKS_REPORTED = 50


def resolve_allowed(path: str | Path, roots: Sequence[Path], *, cwd: Path) -> tuple[Path, Path]:
    """Resolve ``path`` (relative to ``cwd``) and check it stays inside an allowed root.

    Returns:
        (resolved path, the root containing it).

    Raises:
        PathNotAllowedError: the resolved path (after ``..`` and symlinks) is outside every root.
        InvalidInputError: the path is empty or contains a NUL byte.
    """
    return resolve_inside(
        path,
        roots,
        cwd=cwd,
        what="rule document path",
        hint="ingest files inside the project, or add the folder to rules.allowed_roots "
        "in memoir.toml",
    )


def display_path(resolved: Path, root: Path) -> str:
    """The path recorded in the graph: relative to its root, POSIX separators."""
    try:
        relative = resolved.relative_to(root)
    except ValueError:
        return resolved.as_posix()
    text = relative.as_posix()
    return text if text != "." else resolved.name


def validate_virtual_path(path: str) -> str:
    """Check the path given with raw markdown content (MCP ``upsert_text``).

    Returns:
        The normalised POSIX relative path.

    Raises:
        PathNotAllowedError: absolute, or climbing out with ``..``.
        InvalidInputError: empty or with control characters.
    """
    text = path.strip().replace("\\", "/")
    if not text or any(ord(c) < 32 for c in text):
        raise InvalidInputError(
            f"invalid document path {path[:80]!r}",
            hint="name the document like a relative file path, e.g. 'rules/api.md'",
        )
    pure = PurePosixPath(text)
    if pure.is_absolute() or ".." in pure.parts or (len(text) > 1 and text[1] == ":"):
        raise PathNotAllowedError(
            f"document path {path[:200]!r} must be relative and must not contain '..'",
            hint="use a path relative to the project root, e.g. 'rules/api.md'",
        )
    return pure.as_posix()


def escaping_links(paths: Sequence[str], roots: Sequence[Path], *, cwd: Path) -> list[str]:
    """Warnings for the symlinks inside the given folders that lead outside every allowed
    root (or nowhere): the folder walk skips them, and the caller must hear why.

    Blocking (run it in a worker thread); bounded to the first few dozen links.
    """
    real_roots = [r.resolve(strict=False) for r in roots]
    warnings: list[str] = []
    for raw in paths:
        folder = Path(raw).expanduser()
        folder = folder if folder.is_absolute() else cwd / folder
        if not folder.is_dir() or folder.is_symlink():
            continue
        for current, dirnames, filenames in os.walk(folder, followlinks=False):
            for name in (*dirnames, *filenames):
                link = Path(current, name)
                if not link.is_symlink():
                    continue
                try:
                    target = link.resolve(strict=True)
                except (OSError, RuntimeError):
                    target = None
                if target is None or not any(
                    target == r or target.is_relative_to(r) for r in real_roots
                ):
                    shown = link.relative_to(folder).as_posix()
                    warnings.append(
                        f"{shown}: skipped: a symlink leading outside the allowed folders "
                        f"(to {target or 'nowhere'})"
                    )
                    if len(warnings) >= _MAX_LINKS_REPORTED:
                        return warnings
    return warnings
