"""How much one ingest may carry, checked before any work is done.

A 2 MB text once held an MCP call for minutes (past clients' request timeouts) and filled the
tree with junk. One ``ingest`` takes at most ``hierarchy.max_ingest_bytes`` of UTF-8 text; more
is refused with the size, the limit, and the setting to change. Inputs over
``hierarchy.ingest_batch_bytes`` stream in batches with bounded memory
(:mod:`memory_core.hierarchy.streamed`), so the limit can be raised safely for large files.
"""

from __future__ import annotations

from memory_core.errors import InvalidInputError

__all__ = ["check_ingest_size", "human_bytes"]


def human_bytes(size: int) -> str:
    """``2,097,152 bytes (2.0 MB)``: exact for the record, rounded for the reader."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size:,} bytes ({size / scale:.1f} {unit})"
    return f"{size:,} bytes"


def check_ingest_size(size: int, limit: int, *, what: str = "the text") -> None:
    """Refuse an input of ``size`` bytes over ``limit``.

    Raises:
        InvalidInputError: names the size, the limit and ``hierarchy.max_ingest_bytes``.
    """
    if size <= limit:
        return
    raise InvalidInputError(
        f"{what} is {human_bytes(size)}, over hierarchy.max_ingest_bytes: {human_bytes(limit)}",
        hint=f"split it into parts under {human_bytes(limit).split('(')[-1].rstrip(')')}, or "
        "raise hierarchy.max_ingest_bytes in memoir.toml (MEMOIR_HIERARCHY__MAX_INGEST_BYTES): "
        "large inputs stream in batches with bounded memory",
        details={"bytes": size, "limit": limit, "setting": "hierarchy.max_ingest_bytes"},
    )
