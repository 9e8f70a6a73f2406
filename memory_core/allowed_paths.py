"""Is a path inside the folders memoir may read? One check for every reader of local files
(rule documents, the memory layer's resources).

A path is accepted only when its fully resolved location (``..`` and every symlink followed)
lies inside one of the allowed roots, so a link inside a root that leads out of it is refused
like the path it leads to.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memory_core.errors import InvalidInputError, PathNotAllowedError

__all__ = ["resolve_inside"]


def resolve_inside(
    path: str | Path, roots: Sequence[Path], *, cwd: Path, what: str, hint: str
) -> tuple[Path, Path]:
    """Resolve ``path`` (relative to ``cwd``) and check it stays inside an allowed root.

    Args:
        what: names the path in messages ("rule document path", "resource path").
        hint: the next step when the path is outside every root (the setting to change).

    Returns:
        (resolved path, the root containing it).

    Raises:
        PathNotAllowedError: the resolved path is outside every root (or there is no root).
        InvalidInputError: the path is empty or contains a NUL byte.
    """
    text = str(path)
    if not text.strip() or "\x00" in text:
        raise InvalidInputError(f"invalid {what} {text[:80]!r}", hint="pass a file or folder path")
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = cwd / candidate
    resolved = candidate.resolve(strict=False)
    for root in roots:
        real_root = root.resolve(strict=False)
        if resolved == real_root or resolved.is_relative_to(real_root):
            return resolved, real_root
    shown = ", ".join(str(r) for r in roots) or "(none configured)"
    raise PathNotAllowedError(
        f"{what} {text[:200]!r} resolves to {str(resolved)[:200]!r}, outside the allowed roots "
        + shown,
        hint=hint,
        details={"path": text[:200], "resolved": str(resolved)[:200],
                 "allowed_roots": [str(r) for r in roots]},
    )  # fmt: skip
