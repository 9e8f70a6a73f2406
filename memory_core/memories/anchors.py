"""Code-anchored memories: a memory about code remembers where that code was.

An anchor is a file path (relative to the working tree root), a 1-based inclusive line span,
the sha256 of those lines and the git commit checked out when it was written. Recall re-reads
the file and labels the memory instead of trusting its age:

- ``valid``: the lines at the span still hash the same;
- ``moved``: the same lines are found elsewhere in the file (the new span is reported);
- ``stale``: the lines changed, or the file is gone;
- ``unchecked``: no working tree to check against.

Paths never leave the root (``..`` and absolute paths outside it are refused). The commit is
read from ``.git`` directly (``HEAD``, a loose ref or ``packed-refs``), without running git.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memory_core.errors import InvalidInputError, NotFoundError, PathNotAllowedError

__all__ = [
    "AnchorCheck",
    "AnchorStatus",
    "capture_anchor",
    "check_anchor",
    "git_commit",
    "lines_hash",
]

AnchorStatus = Literal["valid", "moved", "stale", "unchecked"]
_MAX_FILE_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AnchorCheck:
    status: AnchorStatus
    start_line: int | None = None
    end_line: int | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "reason": self.reason,
        }


def lines_hash(lines: list[str]) -> str:
    """sha256 of the lines joined by newlines, trailing whitespace of each line ignored."""
    return hashlib.sha256("\n".join(line.rstrip() for line in lines).encode("utf-8")).hexdigest()


def _inside(root: Path, relative: str) -> Path:
    base = root.resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise PathNotAllowedError(
            f"anchor path {relative!r} is outside the working tree {base}",
            hint="give a path relative to the project root",
        )
    return target


def _read_lines(path: Path) -> list[str] | None:
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def git_commit(root: Path) -> str | None:
    """The commit checked out in ``root`` (a git work tree), or None."""
    git = root / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: <path>"
            git = Path(git.read_text(encoding="utf-8").split(":", 1)[1].strip())
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, IndexError):
        return None
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    for base in (git, git.parent.parent if git.parent.name == "worktrees" else git):
        try:
            return (base / ref).read_text(encoding="utf-8").strip()
        except OSError:
            pass
        try:
            for line in (base / "packed-refs").read_text(encoding="utf-8").splitlines():
                if line.endswith(" " + ref):
                    return line.split(" ", 1)[0]
        except OSError:
            pass
    return None


def capture_anchor(root: Path, path: str, start_line: int, end_line: int | None) -> dict[str, Any]:
    """The anchor of lines ``start_line..end_line`` of ``path`` as they are now.

    Raises:
        PathNotAllowedError: the path leaves the root.
        NotFoundError: the file cannot be read.
        InvalidInputError: the span is not inside the file.
    """
    end = end_line or start_line
    target = _inside(root, path)
    lines = _read_lines(target)
    if lines is None:
        raise NotFoundError(
            f"cannot read {path!r} under {root}", hint="anchor a text file of the project"
        )
    if not 1 <= start_line <= end <= len(lines):
        raise InvalidInputError(
            f"lines {start_line}-{end} are outside {path!r} ({len(lines)} lines)",
            hint="give a 1-based line span inside the file",
        )
    return {
        "path": str(target.relative_to(root.resolve())),
        "start_line": start_line,
        "end_line": end,
        "content_hash": lines_hash(lines[start_line - 1 : end]),
        "commit": git_commit(root),
    }


def check_anchor(anchor: dict[str, Any], root: Path | None) -> AnchorCheck:
    """Re-check ``anchor`` against the working tree at ``root`` (see the module docstring)."""
    if root is None:
        return AnchorCheck("unchecked", reason="no working tree to check against")
    try:
        target = _inside(root, str(anchor["path"]))
    except PathNotAllowedError as exc:
        return AnchorCheck("stale", reason=exc.message)
    lines = _read_lines(target)
    if lines is None:
        return AnchorCheck("stale", reason=f"{anchor['path']} is missing or unreadable")
    start, end = int(anchor["start_line"]), int(anchor["end_line"])
    wanted = str(anchor["content_hash"])
    if end <= len(lines) and lines_hash(lines[start - 1 : end]) == wanted:
        return AnchorCheck("valid", start, end)
    span = end - start + 1
    for first in range(0, max(0, len(lines) - span + 1)):
        if lines_hash(lines[first : first + span]) == wanted:
            return AnchorCheck("moved", first + 1, first + span, reason="same lines, new place")
    return AnchorCheck("stale", reason="the anchored lines changed")
