"""Input the CLI reads from outside its arguments, bounded: stdin never grows without limit."""

from __future__ import annotations

import sys
from typing import BinaryIO

from memory_core.errors import InvalidInputError, LimitExceededError

__all__ = ["read_stdin_text"]

_CHUNK = 1 << 16


def read_stdin_text(limit: int, *, stream: BinaryIO | None = None) -> str:
    """All of stdin as UTF-8 text, refusing it past ``limit`` bytes (``limits.stdin_bytes``)
    without reading further (a runaway producer is cut off, memory stays bounded).

    Raises:
        LimitExceededError: more than ``limit`` bytes arrived.
        InvalidInputError: the bytes are not UTF-8.
    """
    source = stream if stream is not None else sys.stdin.buffer
    parts: list[bytes] = []
    size = 0
    while chunk := source.read(min(_CHUNK, limit + 1 - size)):
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            raise LimitExceededError(
                "stdin is larger than allowed",
                value=size,
                limit=limit,
                setting="limits.stdin_bytes",
                hint="pass the file by name (memoir ingest FILE streams it), split the input, "
                "or raise limits.stdin_bytes (MEMOIR_LIMITS__STDIN_BYTES)",
            )
    try:
        return b"".join(parts).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"stdin is not UTF-8 text (byte {exc.start})", hint="convert it to UTF-8 first"
        ) from exc
