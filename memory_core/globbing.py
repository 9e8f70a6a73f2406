"""Path globs with ``**``: shared by ``memoir add --glob/--ignore`` and FEL's ``GLOB``.

``**/`` matches zero or more folders, ``**`` anything, ``*`` anything within one path segment,
``?`` one character (not ``/``), ``[...]`` a character class (``[!...]`` negated).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["glob_match", "glob_to_regex"]


@lru_cache(maxsize=512)
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """The compiled regex equivalent to the path glob ``pattern`` (anchored at both ends)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(char))
                i += 1
                continue
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = re.escape(body[1:] if negate else body).replace("\\-", "-")
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """Whether ``path`` (posix separators) matches the glob ``pattern``."""
    return glob_to_regex(pattern).match(path) is not None
