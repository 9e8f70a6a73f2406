"""Safe FTS5 MATCH expressions from arbitrary user text.

FTS5's query syntax treats quotes, ``-``, ``:``, ``*``, ``^``, parentheses and the words AND /
OR / NOT / NEAR as operators, so passing user text through raises syntax errors (or worse,
changes the meaning). We extract word tokens and emit each as a double-quoted string (quotes
doubled inside), so any text is a valid query. This is the same approach sqlite-utils documents
in its ``quote_fts``.
"""

from __future__ import annotations

import re

__all__ = ["build_match", "fts_terms", "quote_term"]

# Letters, digits and underscore in any script; everything else separates terms, as the
# unicode61 tokenizer does.
_WORD = re.compile(r"\w+", re.UNICODE)


def fts_terms(text: str, *, max_terms: int = 32) -> list[str]:
    """Distinct word tokens of ``text`` in first-seen order, lowercased, at most ``max_terms``."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text.lower()):
        seen.setdefault(match.group(), None)
        if len(seen) >= max_terms:
            break
    return list(seen)


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def build_match(text: str, *, operator: str = "OR", max_terms: int = 32) -> str | None:
    """A MATCH expression joining the quoted terms of ``text`` with ``operator``.

    Returns None when the text has no searchable term (the caller then skips the lexical arm).
    """
    if operator not in ("AND", "OR"):
        raise ValueError(f"operator must be AND or OR, not {operator!r}")
    terms = fts_terms(text, max_terms=max_terms)
    if not terms:
        return None
    return f" {operator} ".join(quote_term(t) for t in terms)
