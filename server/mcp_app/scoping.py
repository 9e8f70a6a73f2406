"""Which project a call belongs to, and which folders the server may read for it.

The server decides, from its own configuration (DESIGN §5, issues 13 and 14):

1. the folders it may read are its **workspaces**: ``--workspace`` (repeatable), the
   ``server.workspace`` / ``server.workspaces`` settings, the folders granted to bearer tokens
   (a client's ``${workspaceFolder}`` in its launch configuration is configuration too), else
   the git root of its working directory; a home folder (or ``/``) never becomes a project;
2. an authenticated HTTP caller only gets the workspaces its token grants;
3. MCP roots are a hint that can **narrow** that choice (pick one of several workspaces, or a
   sub-folder of one), never widen it: a root outside every allowed workspace is ignored with a
   warning, so a client declaring ``file:///`` or another project's root gains nothing;
4. an explicit ``--scope NAME`` names the scope outright (the folders it may read stay the
   workspaces).

A write with no scope is refused, never guessed; a read with no scope uses ``global`` and says
so. The decision (scope and where it came from) is echoed in every tool result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from memory_core.errors import InvalidInputError
from memory_core.scope import GLOBAL_SCOPE, is_never_a_project, project_scope, validate_scope

__all__ = [
    "ScopeDecision",
    "ScopeDefaults",
    "decide_scope",
    "git_root_of",
    "paths_from_root_uris",
    "require_write_scope",
    "within",
]

ScopeSource = Literal["explicit", "roots", "workspace", "cwd", "none"]


def within(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or lies under it (both taken as given: pass resolved paths)."""
    return path == folder or folder in path.parents


def _canonical(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):  # a symlink loop: keep the spelling, it matches nothing
        return path


@dataclass(frozen=True)
class ScopeDefaults:
    """What the server was started with; fixed for its lifetime.

    Args:
        explicit_scope: ``--scope``: every call uses this scope.
        workspace: the main configured project folder (``--workspace``).
        workspaces: further configured project folders (a shared server's projects).
        cwd_root: the git root of the working directory (the fallback when nothing is
            configured; never a home folder).
    """

    explicit_scope: str | None = None
    workspace: Path | None = None
    workspaces: tuple[Path, ...] = ()
    cwd_root: Path | None = None

    @property
    def configured(self) -> tuple[Path, ...]:
        folders = [self.workspace, *self.workspaces] if self.workspace else [*self.workspaces]
        return tuple(dict.fromkeys(_canonical(f) for f in folders))

    @property
    def folders(self) -> tuple[Path, ...]:
        """Every folder the server may read: its workspaces, else the cwd's git root."""
        if self.configured:
            return self.configured
        if self.cwd_root is not None and not is_never_a_project(self.cwd_root):
            return (_canonical(self.cwd_root),)
        return ()


@dataclass(frozen=True)
class ScopeDecision:
    """The scope of one call, where it came from, and the folders the server may read for it.

    ``root`` is the folder relative paths are read from; ``readable`` every folder a path may
    lie in (empty: the call reads no files). ``warnings`` say when roots were ignored.
    """

    scope: str | None
    source: ScopeSource
    root: Path | None = None
    readable: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    @property
    def read_scope(self) -> str:
        return self.scope or GLOBAL_SCOPE


def git_root_of(start: Path) -> Path | None:
    """The nearest folder holding ``.git`` from ``start`` upward, or None when not in a repo
    (or when that folder is a home folder or ``/``: never a project)."""
    start = _canonical(start)
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return None if is_never_a_project(folder) else folder
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


def _project_within(root: Path, workspace: Path) -> Path:
    """The project a root inside ``workspace`` names: the nearest git root from the root up
    to the workspace (a root in a project's sub-folder names that project), else the root."""
    for folder in (root, *root.parents):
        if not within(folder, workspace):
            break
        if (folder / ".git").exists():
            return folder
    return root


def _narrow(roots: Sequence[Path], allowed: Sequence[Path]) -> list[tuple[Path, Path]]:
    """(project, readable folder) for each root that overlaps an allowed workspace."""
    found: list[tuple[Path, Path]] = []
    for raw in roots:
        root = _canonical(raw)
        for workspace in allowed:
            if within(root, workspace):
                found.append((_project_within(root, workspace), root))
            elif within(workspace, root):  # a wider root: the workspace is the intersection
                found.append((workspace, workspace))
    return list(dict.fromkeys(found))


def decide_scope(
    root_uris: Sequence[str] | None,
    defaults: ScopeDefaults,
    *,
    grant: Sequence[Path] | None = None,
) -> ScopeDecision:
    """The scope of one call (pure but for resolving paths).

    Args:
        root_uris: the client's MCP roots (a hint).
        defaults: the server's configuration.
        grant: the folders the caller's credentials allow (None: every server workspace).
    """
    allowed = (
        defaults.folders
        if grant is None
        else tuple(dict.fromkeys(_canonical(Path(g)) for g in grant))
    )
    roots = paths_from_root_uris(root_uris or ())
    narrowed = _narrow(roots, allowed)
    warnings: tuple[str, ...] = ()
    ignored = [r for r in roots if not _narrow([r], allowed)]
    if ignored:
        shown = ", ".join(str(r) for r in ignored[:3])
        warnings = (
            f"ignored MCP roots outside the server's workspaces ({shown}): the server reads only "
            "its configured workspaces; start it with --workspace for that project",
        )
    if defaults.explicit_scope:
        readable = tuple(r for _, r in narrowed) or allowed
        return ScopeDecision(
            validate_scope(defaults.explicit_scope),
            "explicit",
            readable[0] if readable else None,
            readable,
            warnings,
        )
    if narrowed:
        project, root = narrowed[0]
        readable = tuple(r for p, r in narrowed if p == project)
        return ScopeDecision(project_scope(project), "roots", root, readable, warnings)
    if allowed:
        source: ScopeSource = "workspace" if defaults.configured or grant is not None else "cwd"
        return ScopeDecision(project_scope(allowed[0]), source, allowed[0], allowed, warnings)
    return ScopeDecision(None, "none", None, (), warnings)


def require_write_scope(decision: ScopeDecision) -> str:
    """The scope a write goes to.

    Raises:
        InvalidInputError: no scope could be determined (no workspace, no git root).
    """
    if decision.scope is None:
        raise InvalidInputError(
            "refusing to write: no project scope for this call (the server has no workspace "
            "for this client, and its working directory is not a project)",
            hint="start the server with `memoir serve --workspace /path/to/project` (a client's "
            "${workspaceFolder} works), or `--scope NAME`",
        )
    return decision.scope
