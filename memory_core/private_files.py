"""Files memoir writes that hold store content (exports) are private to their owner: mode 0600
from the moment they exist, like the store itself."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

__all__ = ["open_private_text"]


def open_private_text(path: Path) -> IO[str]:
    """Open ``path`` for writing text, created (or truncated) with mode 0600.

    An existing file loses any group / other permission before a byte is written.

    Raises:
        OSError: the file cannot be created or opened.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise
