"""Scopes: which project a read or write belongs to.

A scope is a short string. Project scopes are ``project:<absolute path of the project root>``;
the root comes from the MCP client's roots, else the configured workspace, else the git root of
the working directory. ``global`` is shared by every project on the store. An unscoped write is
refused by the adapters, never guessed.
"""

from __future__ import annotations

from pathlib import Path

from memory_core.errors import InvalidInputError

__all__ = ["GLOBAL_SCOPE", "find_project_root", "project_scope", "resolve_scope", "validate_scope"]

GLOBAL_SCOPE = "global"
_MAX_SCOPE = 512


def find_project_root(start: Path) -> Path:
    """The nearest folder holding ``.git`` from ``start`` upward, else ``start`` itself."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def project_scope(root: Path) -> str:
    return f"project:{root.resolve()}"


def validate_scope(scope: str) -> str:
    """Check a caller-given scope string.

    Raises:
        InvalidInputError: empty, too long, or with control characters.
    """
    value = scope.strip()
    if not value or len(value) > _MAX_SCOPE or any(ord(c) < 32 for c in value):
        raise InvalidInputError(
            f"invalid scope {scope[:60]!r}",
            hint=f"use 'global', 'project:/abs/path', or a name under {_MAX_SCOPE} characters",
        )
    return value


def resolve_scope(explicit: str | None, *, workspace: str | None, cwd: Path) -> str:
    """explicit > configured workspace > git root of ``cwd`` (else ``cwd``)."""
    if explicit:
        return validate_scope(explicit)
    if workspace:
        return project_scope(Path(workspace).expanduser())
    return project_scope(find_project_root(cwd))
