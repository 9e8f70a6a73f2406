"""Safe FTS5 MATCH expressions: every term double-quoted (quotes doubled inside).

FTS5's query syntax treats quotes, ``-``, ``:``, ``*``, ``^``, parentheses and the words AND /
OR / NOT / NEAR as operators, so user text passed through raises syntax errors or changes the
meaning. Terms reach the backend as plain words (:class:`~memory_core.storage.ports.LexicalQuery`)
and become quoted strings here, the approach sqlite-utils documents in its ``quote_fts``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["match_expression", "quote_term"]


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: Sequence[str], operator: str) -> str | None:
    """``"a" AND "b"`` (or OR) over the non-empty terms; None when there are none."""
    if operator not in ("AND", "OR"):
        raise ValueError(f"operator must be AND or OR, not {operator!r}")
    quoted = [quote_term(t) for t in dict.fromkeys(terms) if t.strip()]
    return f" {operator} ".join(quoted) if quoted else None
