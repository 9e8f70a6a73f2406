"""Find and read the files ``memoir add`` was pointed at.

Pure decisions over the filesystem, no store access: which files a set of roots and globs
names, which to skip and why (ignored, outside its root through a symlink, a symlink loop,
binary, not UTF-8, unreadable, too large). Skips become warnings; nothing here raises for
one bad file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from memory_core.errors import InvalidInputError, PathNotAllowedError
from memory_core.globbing import glob_match

__all__ = [
    "DEFAULT_IGNORES",
    "FoundFile",
    "ReadFile",
    "check_patterns",
    "discover",
    "format_mtime",
    "normalise_virtual_path",
    "read_text_file",
]

# Never worth indexing, and the store itself must not index its own files.
DEFAULT_IGNORES = (
    "**/.git/**",
    "**/.hg/**",
    "**/.svn/**",
    "**/node_modules/**",
    "**/__pycache__/**",
    "**/.venv/**",
    "**/*.db",
    "**/*.db-wal",
    "**/*.db-shm",
)
_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class FoundFile:
    """A file to ingest: its resolved path and the ``stat`` facts we record."""

    path: Path
    size: int
    mtime: str


@dataclass(frozen=True, slots=True)
class ReadFile:
    """A file's text, or why it was skipped."""

    text: str | None
    warning: str | None


def format_mtime(timestamp: float) -> str:
    """RFC 3339 UTC, second precision (what ``doc.mtime`` compares against)."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def check_patterns(patterns: Sequence[str], option: str) -> None:
    """Refuse patterns that could reach outside a root.

    Raises:
        PathNotAllowedError: a pattern is absolute or uses ``..``.
    """
    for pattern in patterns:
        parts = PurePosixPath(pattern).parts
        if pattern.startswith("/") or ".." in parts:
            raise PathNotAllowedError(
                f"{option} pattern {pattern!r} points outside the folder being added",
                hint=f"write {option} relative to the folder, e.g. '**/*.md'",
            )


def normalise_virtual_path(path: str) -> str:
    """A clean posix form of a virtual path (``memoir add --text --path notes/x.md``).

    Raises:
        InvalidInputError: empty, or with ``..`` segments or control characters.
    """
    value = path.strip().replace("\\", "/")
    if not value or any(ord(c) < 32 for c in value):
        raise InvalidInputError(
            f"invalid virtual path {path[:80]!r}", hint="pass --path like notes/topic.md"
        )
    parts = [p for p in PurePosixPath(value).parts if p not in ("", ".")]
    if ".." in parts:
        raise PathNotAllowedError(
            f"virtual path {path[:80]!r} uses '..'", hint="pass --path like notes/topic.md"
        )
    clean = "/".join(parts)
    return ("/" + clean.lstrip("/")) if value.startswith("/") else clean


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _ignored(relative: str, ignores: Sequence[str]) -> bool:
    return any(glob_match(p, relative) or glob_match(p, "/" + relative) for p in ignores)


def _walk(root: Path, warnings: list[str]) -> Iterator[Path]:
    """Files under ``root``, following symlinked folders once and never in a loop."""
    seen: set[tuple[int, int]] = set()

    def on_error(error: OSError) -> None:
        warnings.append(f"skipped {error.filename}: {error.strerror}")

    for folder, dirs, files in os.walk(root, followlinks=True, onerror=on_error):
        try:
            info = os.stat(folder)
        except OSError as exc:
            warnings.append(f"skipped {folder}: {exc.strerror}")
            dirs[:] = []
            continue
        key = (info.st_dev, info.st_ino)
        if key in seen:
            warnings.append(f"skipped {folder}: a symlink loop leads back to a folder seen before")
            dirs[:] = []
            continue
        seen.add(key)
        dirs.sort()
        for name in sorted(files):
            yield Path(folder) / name


def discover(
    targets: Sequence[Path],
    *,
    globs: Sequence[str] = (),
    ignores: Sequence[str] = (),
) -> tuple[list[FoundFile], list[str]]:
    """The files named by ``targets`` (files or folders), sorted by path, and the warnings.

    A folder is walked recursively; its files must match one of ``globs`` (default: all)
    and none of ``ignores`` or :data:`DEFAULT_IGNORES`, matched against the path relative to
    the folder. A symlink that resolves outside its folder is skipped with a warning.

    Raises:
        PathNotAllowedError: a glob reaches outside the folder.
        InvalidInputError: no target exists.
    """
    check_patterns(globs, "--glob")
    check_patterns(ignores, "--ignore")
    all_ignores = (*DEFAULT_IGNORES, *ignores)
    warnings: list[str] = []
    found: dict[Path, FoundFile] = {}
    existing = 0
    for target in targets:
        target = target.expanduser()
        if not target.exists() and not target.is_symlink():
            warnings.append(f"skipped {target}: no such file or folder")
            continue
        existing += 1
        try:
            root = target.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            warnings.append(f"skipped {target}: cannot resolve it ({exc})")
            continue
        if root.is_file():
            candidates: Iterator[Path] = iter([root])
            base = root.parent
            explicit = True
        else:
            candidates = _walk(root, warnings)
            base = root
            explicit = False
        for candidate in candidates:
            try:
                resolved = candidate.resolve(strict=True)
            except (OSError, RuntimeError) as exc:
                warnings.append(f"skipped {candidate}: cannot resolve it ({exc})")
                continue
            if not _is_within(resolved, base):
                warnings.append(f"skipped {candidate}: it resolves to {resolved}, outside {base}")
                continue
            relative = candidate.relative_to(base).as_posix()
            if not explicit:
                if globs and not any(glob_match(g, relative) for g in globs):
                    continue
                if _ignored(relative, all_ignores):
                    continue
            elif ignores and _ignored(relative, ignores):
                continue
            try:
                info = resolved.stat()
            except OSError as exc:
                warnings.append(f"skipped {candidate}: {exc.strerror}")
                continue
            if not resolved.is_file():
                continue
            found[resolved] = FoundFile(resolved, info.st_size, format_mtime(info.st_mtime))
    if existing == 0:
        raise InvalidInputError(
            "none of the given paths exist: " + ", ".join(str(t) for t in targets[:5]),
            hint="check the paths; use `memoir add --text ... --path name.md` for text",
        )
    return [found[p] for p in sorted(found)], warnings


def read_text_file(file: FoundFile, *, max_bytes: int) -> ReadFile:
    """The UTF-8 text of ``file`` (a BOM is dropped), or a warning saying why it was skipped."""
    if file.size > max_bytes:
        return ReadFile(
            None,
            f"skipped {file.path}: {file.size} bytes is over documents.max_file_bytes "
            f"({max_bytes}); raise it in memoir.toml to ingest this file",
        )
    try:
        raw = file.path.read_bytes()
    except OSError as exc:
        return ReadFile(None, f"skipped {file.path}: cannot read it ({exc.strerror})")
    if b"\x00" in raw[:_SNIFF_BYTES]:
        return ReadFile(None, f"skipped {file.path}: binary file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ReadFile(
            None, f"skipped {file.path}: not UTF-8 text (invalid byte at offset {exc.start})"
        )
    return ReadFile(text.removeprefix("\ufeff"), None)
