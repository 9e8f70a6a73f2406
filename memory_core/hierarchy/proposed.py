"""The calling agent as the classifier: a category path it proposes, checked against the tree.

``ingest(text, category="Databases / Indexing")`` files the text under that path with no model
call on the server: the agent's own model has already classified it (memoirAI Requirement 2's
classification, done where the tokens are already paid for). The proposal is validated:

- at most ``hierarchy.depth`` names, each 1-80 characters; ``"A / B"`` or a list of names;
- existing names are preferred: each proposed name is matched among the existing children of
  the path so far: same name ignoring case and spacing, then the same words up to plurals, then
  nearly the same spelling (edit similarity >= 90), then a name whose words it is part of
  ("Astronomy" matches "Astronomy and Telescopes"); a match is reported as a warning;
- a new name is created only while the global cap allows a whole new path below it;
- a shorter path is completed by the offline classifier (the nearest existing child by meaning,
  else a new child named from the text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from memory_core.errors import InvalidInputError
from memory_core.hierarchy.store import Category, normalise_category_name
from memory_core.llm.keyphrases import stem

__all__ = ["MAX_PROPOSED_NAME_CHARS", "NameMatch", "match_name", "parse_category_path"]

MAX_PROPOSED_NAME_CHARS = 80
_SEPARATOR = "/"
_SIMILAR = 90.0


def parse_category_path(proposal: str | Sequence[str], *, depth: int) -> list[str]:
    """The names of a proposed path, broadest first.

    Raises:
        InvalidInputError: an empty name, a name over 80 characters, or more levels than
            ``depth``.
    """
    raw = proposal.split(_SEPARATOR) if isinstance(proposal, str) else list(proposal)
    names = [" ".join(str(part).split()) for part in raw]
    shown = " / ".join(names)
    if not names or any(not name for name in names):
        raise InvalidInputError(
            f"category path {shown!r} has an empty name",
            hint='name every level, broadest first, e.g. "Databases / Indexing"',
        )
    long = next((name for name in names if len(name) > MAX_PROPOSED_NAME_CHARS), None)
    if long is not None:
        raise InvalidInputError(
            f"category name {long[:40]!r}… has {len(long)} characters, over "
            f"{MAX_PROPOSED_NAME_CHARS}",
            hint="name a category in one to four words",
        )
    if len(names) > depth:
        raise InvalidInputError(
            f"category path {shown!r} has {len(names)} levels; this tree has {depth}",
            hint=f"pass at most {depth} names separated by ' / ', broadest first",
        )
    return names


@dataclass(frozen=True)
class NameMatch:
    """The existing category a proposed name stands for, and how it was recognised."""

    category: Category
    exact: bool


def _words(name: str) -> set[str]:
    return {stem(w) for w in normalise_category_name(name).split() if w not in {"and", "&"}}


def match_name(proposed: str, options: Sequence[Category]) -> NameMatch | None:
    """The existing category among ``options`` that ``proposed`` names, if any."""
    wanted = normalise_category_name(proposed)
    for option in options:
        if normalise_category_name(option.name) == wanted:
            return NameMatch(option, exact=True)
    words = _words(proposed)
    for option in options:
        if words and _words(option.name) == words:
            return NameMatch(option, exact=False)
    scored = [(fuzz.ratio(wanted, normalise_category_name(o.name)), o) for o in options]
    close = [(score, o) for score, o in scored if score >= _SIMILAR]
    if close:
        best = max(close, key=lambda so: (so[0], -so[1].category_id))
        return NameMatch(best[1], exact=False)
    wider = [o for o in options if words and words < _words(o.name)]
    if wider:
        best_wider = min(wider, key=lambda o: (len(_words(o.name)), o.category_id))
        return NameMatch(best_wider, exact=False)
    return None
