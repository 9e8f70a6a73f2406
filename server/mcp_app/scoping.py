"""Which project a tool call belongs to.

Order (DESIGN §5, issue 5): an explicit ``--scope`` given to ``memoir serve`` > the client's MCP
roots (first ``file://`` root) > the configured workspace > the git root of the server's working
directory (a team's shared HTTP server should be started with ``--workspace`` or ``--scope``). A write
with no scope is refused, never guessed; a read with no scope uses the ``global`` scope and says
so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from memory_core.errors import InvalidInputError
from memory_core.scope import GLOBAL_SCOPE, project_scope, validate_scope

__all__ = [
    "ScopeDecision",
    "ScopeDefaults",
    "decide_scope",
    "git_root_of",
    "paths_from_root_uris",
    "require_write_scope",
]

ScopeSource = Literal["explicit", "roots", "workspace", "cwd", "none"]


@dataclass(frozen=True)
class ScopeDefaults:
    """What the server was started with; fixed for its lifetime."""

    explicit_scope: str | None = None
    workspace: Path | None = None
    cwd_root: Path | None = None


@dataclass(frozen=True)
class ScopeDecision:
    """The scope of one call, where it came from, and the folder it maps to (if any)."""

    scope: str | None
    source: ScopeSource
    root: Path | None = None

    @property
    def read_scope(self) -> str:
        return self.scope or GLOBAL_SCOPE


def git_root_of(start: Path) -> Path | None:
    """The nearest folder holding ``.git`` from ``start`` upward, or None when not in a repo."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def paths_from_root_uris(uris: Sequence[str]) -> list[Path]:
    """Local folders named by MCP root URIs; non-``file`` URIs are skipped."""
    paths: list[Path] = []
    for uri in uris:
        parsed = urlparse(str(uri))
        if parsed.scheme != "file" or not parsed.path:
            continue
        paths.append(Path(unquote(parsed.path)))
    return paths


def decide_scope(root_uris: Sequence[str] | None, defaults: ScopeDefaults) -> ScopeDecision:
    """The scope of one call from the client's roots and the server's defaults (pure)."""
    if defaults.explicit_scope:
        return ScopeDecision(
            validate_scope(defaults.explicit_scope), "explicit", defaults.workspace
        )
    roots = paths_from_root_uris(root_uris or ())
    if roots:
        return ScopeDecision(project_scope(roots[0]), "roots", roots[0])
    if defaults.workspace is not None:
        return ScopeDecision(project_scope(defaults.workspace), "workspace", defaults.workspace)
    if defaults.cwd_root is not None:
        return ScopeDecision(project_scope(defaults.cwd_root), "cwd", defaults.cwd_root)
    return ScopeDecision(None, "none", None)


def require_write_scope(decision: ScopeDecision) -> str:
    """The scope a write goes to.

    Raises:
        InvalidInputError: no scope could be determined (no roots, no workspace, no git root).
    """
    if decision.scope is None:
        raise InvalidInputError(
            "refusing to write: no project scope for this call (the client offered no MCP roots "
            "and the server has no workspace)",
            hint="start the server with `memoir serve --workspace /path/to/project` (or "
            "`--scope NAME`), or use a client that sends MCP roots",
        )
    return decision.scope
