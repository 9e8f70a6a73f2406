"""Bounds on input that every surface shares (the settings live in ``[limits]``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from memory_core.errors import InvalidInputError, LimitExceededError

__all__ = ["check_path_lengths", "os_error_as_input_error"]


def check_path_lengths(paths: Iterable[str | Path], limit: int) -> None:
    """Refuse a path longer than ``limits.path_chars`` before the file system sees it (a path
    past the OS limit makes every ``stat`` raise).

    Raises:
        LimitExceededError: the first path that is too long.
    """
    for path in paths:
        text = str(path)
        if len(text) > limit:
            raise LimitExceededError(
                f"path {text[:60]!r}… has too many characters",
                value=len(text),
                limit=limit,
                setting="limits.path_chars",
            )


def os_error_as_input_error(exc: OSError) -> InvalidInputError:
    """A file-system refusal (a name too long, a path that is not a folder…) as an error
    naming the path, for the edges that receive it from deep in a walk."""
    where = f" {str(exc.filename)[:120]!r}" if exc.filename else ""
    return InvalidInputError(
        f"cannot use the path{where}: {exc.strerror or exc}",
        hint="check the path (each name at most 255 bytes, the whole under limits.path_chars)",
        details={"errno": exc.errno},
    )
