"""Checks around ``upsert_markdown``: files only from readable folders, and an error (not a
success) when nothing could be loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_core.errors import InvalidInputError, PathNotAllowedError
from server.mcp_app.scoping import ScopeDecision

__all__ = ["raise_if_nothing_loaded", "readable_base"]

_SHOWN_FAILURES = 5


def readable_base(decision: ScopeDecision) -> Path:
    """The folder relative paths are read from.

    Raises:
        PathNotAllowedError: the server may read no folder for this caller.
    """
    if decision.root is None or not decision.readable:
        raise PathNotAllowedError(
            "this server reads no files for this client: it has no workspace (and the client's "
            "roots cannot add one)",
            hint="send the document's markdown as `text` with its name in `paths`, or start "
            "the server with --workspace /path/to/project",
        )
    return decision.root


def raise_if_nothing_loaded(report: Any) -> None:
    """An upsert where every document was refused or failed is an error, not a success.

    Raises:
        InvalidInputError: no document was loaded; the message lists the first failures.
    """
    documents = list(report.documents)
    failed = [d for d in documents if d.status == "failed"]
    if documents and len(failed) < len(documents):
        return
    if not documents and not report.warnings:
        raise PathNotAllowedError(
            "no rule documents found at the given paths",
            hint="pass rule files (AGENTS.md, .cursor/rules/*.mdc, the memoir template…) or "
            "folders holding them, relative to the project root",
        )
    reasons = [f"{d.path}: {d.error}" for d in failed[:_SHOWN_FAILURES]]
    reasons += list(report.warnings)[: max(0, _SHOWN_FAILURES - len(reasons))]
    raise InvalidInputError(
        f"no rule document was loaded ({len(failed)} refused or failed): " + "; ".join(reasons),
        hint="fix the paths (inside the project, readable rule files), or send the markdown as "
        "`text`",
        details={"failed": [{"path": d.path, "error": d.error} for d in failed[:50]]},
    )
