"""Conflict detection: is a new memory an update of an older one about the same subject? Pure.

Spec stretch goal ("Conflict detection, e.g. updated meeting times, with confirmation prompts
and superseding records"). A new memory *conflicts* with a current one when both talk about
the same subject with different values:

- same subject: their content words (stems, values excluded) overlap with Jaccard >= 0.5 and
  share at least two words, or share every content word of the shorter one;
- different values: the values they state differ (numbers, clock times, dates, weekdays,
  months, on/off words), or exactly one of them is negated ("not", "no longer", "never"), or
  the new one says it is an update ("switched to", "moved to", "changed", "now", "instead").

The caller decides what to do (``on_conflict``): supersede the older entry (it is kept, with
``valid_to`` and ``superseded_by``), ask (nothing is written; the conflict is returned for
confirmation) or keep both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.llm.keyphrases import word_stems

__all__ = ["Conflict", "find_conflicts", "subject_and_values"]

_VALUE = re.compile(
    r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b|\b\d+(?:[.:/-]\d+)*\b|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b|"
    r"\b(?:january|february|march|april|may|june|july|august|september|october|november|december)\b|"
    r"\b(?:off|enabled|disabled|true|false)\b|\bon\b(?=\s*[.!;,]?\s*$)",
    re.IGNORECASE,
)
_UPDATE = re.compile(
    r"\b(?:switched|moved|changed|now|instead|anymore|no\s+longer|from\s+now\s+on|updated)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(?:not|no\s+longer|never|don'?t|doesn'?t|isn'?t|aren'?t|won'?t|stopped)\b", re.IGNORECASE
)
# Words that say a value changed; they carry no subject.
_CHANGE_WORDS = frozenset(
    {"moved", "move", "changed", "change", "now", "instead", "updated", "update", "switch",
     "switched", "anymore", "longer"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Conflict:
    item_id: int
    memory_id: str
    text: str
    reason: str


def subject_and_values(text: str) -> tuple[set[str], set[str], bool]:
    """Content stems without values, the values (normalised), and whether it is negated."""
    values = {v.lower().rstrip("s").replace(" ", "") for v in _VALUE.findall(text)}
    without = _VALUE.sub(" ", text)
    subject = {w for w in word_stems(without) if w not in _CHANGE_WORDS}
    return subject, values, bool(_NEGATION.search(text))


def _same_subject(a: set[str], b: set[str]) -> bool:
    shared = a & b
    if not shared:
        return False
    if len(shared) >= 2 and len(shared) / len(a | b) >= 0.5:
        return True
    shorter = min(a, b, key=len)
    return len(shorter) >= 2 and shared == shorter


def find_conflicts(
    text: str, candidates: Sequence[tuple[int, str, str]], *, limit: int = 3
) -> list[Conflict]:
    """Which of ``candidates`` (item_id, memory_id, text) the new ``text`` updates."""
    subject, values, negated = subject_and_values(text)
    found: list[Conflict] = []
    for item_id, memory_id, other in candidates:
        other_subject, other_values, other_negated = subject_and_values(other)
        if not _same_subject(subject, other_subject):
            continue
        if values and other_values and values != other_values:
            reason = f"values changed: {sorted(other_values)} -> {sorted(values)}"
        elif negated != other_negated:
            reason = "one of them is negated"
        elif _UPDATE.search(text) and not _UPDATE.search(other):
            reason = "the new statement says it is an update"
        else:
            continue
        found.append(Conflict(item_id, memory_id, other, reason))
        if len(found) >= limit:
            break
    return found
