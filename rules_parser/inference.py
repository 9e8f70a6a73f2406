"""Infer severity, topics and layers from wording, with the shared vocabulary.

All functions are pure and case-insensitive. Keywords match on word boundaries, so ``api``
does not match ``rapid`` and ``ci`` does not match ``decide``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cache

from rules_parser.models import SEVERITIES, Severity, SeveritySource
from rules_parser.vocabulary import LAYER_KEYWORDS, SEVERITY_CUES, TOPIC_KEYWORDS

__all__ = [
    "infer_layer",
    "infer_severity",
    "infer_topics",
    "match_keywords",
    "split_severity_marker",
]

# A marker at the start of a statement: [MUST], (SHOULD), **MAY**, `MUST`, MUST:, MUST -
_MARKER_RE = re.compile(
    r"""^\s*(?:
        \[\s*(?P<a>must|should|may)\s*\]\s*[:\-–—]?
      | \(\s*(?P<b>must|should|may)\s*\)\s*[:\-–—]?
      | (?:\*\*|__|`)\s*\[?(?P<c>must|should|may)\]?\s*:?\s*(?:\*\*|__|`)\s*[:\-–—]?
      | (?P<d>MUST|SHOULD|MAY)(?:\s*:|\s+[-–—])
    )\s*""",
    re.IGNORECASE | re.VERBOSE,
)

_HEDGE_RE = re.compile(
    r"\b(?:where|when|if|wherever|whenever|as far as|as much as)\s+(?:you|we|it)\s+can\b", re.I
)


def split_severity_marker(text: str) -> tuple[Severity | None, str]:
    """Split a leading severity marker off a statement.

    Accepts ``[MUST]``, ``(SHOULD)``, ``**MAY**``, ``**[MUST]**``, and an upper-case
    ``MUST:`` / ``MUST -``.

    Args:
        text: a heading or bullet text.

    Returns:
        The severity (or None when there is no marker) and the text without the marker.
    """
    match = _MARKER_RE.match(text)
    if match is None:
        return None, text.strip()
    word = next(g for g in match.group("a", "b", "c", "d") if g)
    return word.upper(), text[match.end() :].strip()  # type: ignore[return-value]


@cache
def _pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    # Longest first so "unit test" wins over "test"; lookarounds instead of \b because some
    # keywords start or end with punctuation (".net", "c#", "ci/cd").
    parts = sorted({re.escape(k) for k in keywords}, key=len, reverse=True)
    return re.compile(r"(?<![\w.#/+-])(?:" + "|".join(parts) + r")(?![\w#+]|[./-]\w)", re.I)


@cache
def _combined(
    entries: tuple[tuple[str, tuple[str, ...]], ...],
) -> tuple[re.Pattern[str], dict[str, tuple[str, ...]]]:
    # One pass over the text for a whole vocabulary: an alternation of every keyword, and a
    # table from keyword to the entries that list it (a keyword may belong to several).
    owners: dict[str, list[str]] = {}
    for name, keywords in entries:
        for keyword in keywords:
            owners.setdefault(keyword.lower(), []).append(name)
    return _pattern(tuple(owners)), {k: tuple(v) for k, v in owners.items()}


def match_keywords(text: str, vocabulary: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Count keyword hits per vocabulary entry.

    Args:
        text: any text.
        vocabulary: name -> keywords, e.g. ``LAYER_KEYWORDS`` or ``TOPIC_KEYWORDS``.

    Returns:
        name -> number of hits, only for names with at least one hit.
    """
    entries = tuple((name, tuple(keywords)) for name, keywords in vocabulary.items())
    pattern, owners = _combined(entries)
    hits: dict[str, int] = {}
    for match in pattern.finditer(text):
        for name in owners.get(match.group(0).lower(), ()):
            hits[name] = hits.get(name, 0) + 1
    return hits


def infer_topics(text: str, *, limit: int = 6) -> tuple[str, ...]:
    """The canonical topics ``text`` talks about, most hits first (ties by name).

    Args:
        text: any text (headings and statement are the best input).
        limit: the most topics to return.

    Returns:
        Topic names from ``TOPIC_KEYWORDS``.
    """
    hits = match_keywords(text, TOPIC_KEYWORDS)
    ranked = sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(name for name, _ in ranked[:limit])


def infer_layer(text: str) -> str | None:
    """The layer whose keywords ``text`` hits most, or None when none or a tie at the top.

    Args:
        text: any text.

    Returns:
        A layer name from ``LAYER_KEYWORDS`` or None.
    """
    hits = Counter(match_keywords(text, LAYER_KEYWORDS))
    top = hits.most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return None
    return top[0][0]


def infer_severity(text: str) -> tuple[Severity, SeveritySource]:
    """Severity of a statement: from a marker, else from its wording, else the default.

    A leading marker (``[MUST]``) wins. Otherwise the strongest cue word present decides:
    must / never / always / do not / required -> MUST; should / prefer / avoid /
    recommended -> SHOULD; may / consider / can / optionally -> MAY. No cue -> SHOULD
    with source ``default``.

    Args:
        text: a directive statement.

    Returns:
        (severity, source), source one of ``marker``, ``inferred``, ``default``.
    """
    marker, rest = split_severity_marker(text)
    if marker is not None:
        return marker, "marker"
    # Typographic apostrophes are common in copied text ("don’t"); "where you can" is a
    # hedge, not a permission, so it must not turn a statement into a MAY.
    normalized = _HEDGE_RE.sub(" ", rest.replace("\u2019", "'"))
    for severity in SEVERITIES:
        if _pattern(SEVERITY_CUES[severity]).search(normalized):
            return severity, "inferred"
    return "SHOULD", "default"
