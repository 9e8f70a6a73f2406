"""Making user text safe to log: truncated, control characters escaped, secrets redacted.

Requirements 12.2, 12.5 and 13.2: a task description is logged as its first 100 characters,
with newlines and other control characters escaped (no forged log lines) and anything that
looks like a key or token replaced.
"""

from __future__ import annotations

from rules_parser import redact

__all__ = ["sanitize_for_log"]


def sanitize_for_log(text: str, limit: int = 100) -> str:
    """The first ``limit`` characters of ``text``, secrets redacted, control chars escaped."""
    head = redact(text[: limit * 4])[:limit]
    out = []
    for char in head:
        if char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 32 or ord(char) == 127 or 0x80 <= ord(char) < 0xA0:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    escaped = "".join(out)
    # Escapes lengthen the text: the limit applies to what is written to the log.
    if len(escaped) > limit or len(text) > limit:
        return escaped[:limit] + "…"
    return escaped
