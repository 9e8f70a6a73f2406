"""Polarity: whether a directive says what to do, what never to do, or what to ask about first.

Real rule files say "never" with headings as often as with words: a bullet ``Use `as any```
under "🚫 Never do" is a prohibition, though its own text reads as an instruction. Polarity is
read from the statement first (``never``, ``do not``, ``avoid``, ``No …``, a leading ❌), then
from the nearest heading or list label that carries a cue ("Never", "Don't", "Avoid",
"Prohibited", "Anti-patterns", ❌ / 🚫; "Ask first" / "Ask before" is its own kind).

The statement is never rewritten (citations and labels keep the author's words); the marker
rendered before it carries the polarity: ``MUST NOT`` when the text does not negate itself,
``ASK FIRST`` for the ask kind.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rules_parser.models import Polarity, Severity

__all__ = [
    "directive_marker",
    "heading_polarity",
    "is_label_heading",
    "negates_itself",
    "resolve_polarity",
    "text_polarity",
]

_EMOJI_NO = ("❌", "🚫", "⛔", "✋", "🛑", "✗", "✘", "×")
_EMOJI_YES = ("✅", "✔", "☑", "👍", "🟢")
_EMOJI_ASK = ("⚠️ ask", "❓", "🤔")

_ASK_RE = re.compile(
    r"\b(?:ask\s+(?:first|before|the\s+user|for\s+(?:approval|permission|confirmation))"
    r"|(?:requires?|needs?|get|seek)\s+(?:explicit\s+)?(?:approval|permission|confirmation)"
    r"|check\s+with\s+(?:the\s+)?(?:user|maintainers?|team|me)"
    r"|confirm\s+(?:first|before|with\s+the\s+user))\b",
    re.I,
)
# Words that make a statement negate itself: rendered as written, with the plain severity.
_SELF_NEGATION_RE = re.compile(
    r"(?:^|[\s(*_\"'`])(?:never|do\s+not|don'?t|dont|must\s+not|mustn'?t|should\s+not|"
    r"shouldn'?t|shall\s+not|may\s+not|prohibited|forbidden|not\s+allowed)\b",
    re.I,
)
# "Avoid …" forbids; "Import directly … to avoid loading …" instructs: only a leading one counts.
_LEADING_AVOID_RE = re.compile(
    r"^\W*(?:please\s+|always\s+|try\s+to\s+|you\s+should\s+)?(?:avoid|refrain\s+from|stop)\b",
    re.I,
)
_LEADING_NO_RE = re.compile(r"^\W*(?:no|not|without|nothing|none)\b(?!\s*[.:,-]?\s*$)", re.I)
_HEADING_MUST_NOT_RE = re.compile(
    r"\b(?:never|don'?t|dont|do\s+not|must\s+not|mustn'?t|prohibited|prohibitions?|forbidden|"
    r"not\s+allowed|disallowed|banned|restrictions?|what\s+not\s+to|don'?ts)\b",
    re.I,
)
# "Don't Repeat Yourself" names a principle, not a list of prohibitions.
_NOT_A_PROHIBITION_RE = re.compile(r"don'?t\s+repeat\s+yourself|\bdry\b", re.I)
# Words a pure label heading is made of ("🚫 Never do these things"): with nothing else left,
# every item under it takes its polarity; a heading that is itself a statement ("Avoid global
# mutation") only passes it to items that are not instructions of their own.
_LABEL_WORDS = frozenset(
    [
        "never",
        "don't",
        "dont",
        "do",
        "not",
        "must",
        "mustn't",
        "should",
        "shouldn't",
        "avoid",
        "anti",
        "pattern",
        "patterns",
        "antipattern",
        "antipatterns",
        "anti-pattern",
        "anti-patterns",
        "pitfall",
        "pitfalls",
        "common",
        "mistakes",
        "mistake",
        "bad",
        "practice",
        "practices",
        "things",
        "thing",
        "to",
        "the",
        "these",
        "following",
        "what",
        "ever",
        "always",
        "you",
        "we",
        "prohibited",
        "prohibitions",
        "prohibition",
        "forbidden",
        "allowed",
        "disallowed",
        "banned",
        "restriction",
        "restrictions",
        "don'ts",
        "dos",
        "do's",
        "and",
        "or",
        "actions",
        "action",
        "rules",
        "rule",
        "list",
        "please",
        "ask",
        "first",
        "before",
        "approval",
        "incorrect",
        "wrong",
        "smells",
        "smell",
        "examples",
        "example",
        "behaviour",
        "behavior",
    ]
)
_HEADING_SHOULD_NOT_RE = re.compile(
    r"\b(?:avoid|anti[-\s]?patterns?|pitfalls?|common\s+mistakes|mistakes\s+to\s+avoid|"
    r"bad\s+(?:practices?|patterns?|examples?)|things\s+to\s+avoid|incorrect|wrong|smells?)\b",
    re.I,
)
_HEADING_DO_RE = re.compile(
    r"^\W*(?:always(?:\s+do)?|do'?s?|dos|must\s+do|required|correct|good|preferred)\W*$", re.I
)


def _normalized(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").strip()


def negates_itself(text: str) -> bool:
    """True when the statement's own words already say "no" (rendered as written)."""
    flat = _normalized(text)
    return bool(
        _SELF_NEGATION_RE.search(flat)
        or _LEADING_NO_RE.match(flat)
        or _LEADING_AVOID_RE.match(flat)
    ) or flat.startswith(_EMOJI_NO)


def text_polarity(text: str) -> Polarity | None:
    """The polarity a statement's own wording gives, or None when it says nothing either way.

    Args:
        text: a directive statement.

    Returns:
        ``dont`` for a negation or a leading ❌, ``ask`` for "ask first"-style wording,
        ``do`` for a leading ✅, else None.
    """
    flat = _normalized(text)
    if flat.startswith(_EMOJI_NO):
        return "dont"
    if flat.startswith(_EMOJI_YES):
        return "do"
    if _ASK_RE.search(flat):
        return "ask"
    if negates_itself(flat):
        return "dont"
    return None


def is_label_heading(heading: str) -> bool:
    """True when a heading is only a polarity label ("🚫 Never do", "Things to avoid")."""
    words = re.findall(r"[a-z][a-z'\-]*", _normalized(heading).lower())
    return all(w in _LABEL_WORDS for w in words)


def heading_polarity(heading: str) -> tuple[Polarity, Severity] | None:
    """The polarity (and its strength) a heading or list label gives the items under it.

    Args:
        heading: a heading's text or a list label ("Don't:").

    Returns:
        (polarity, severity) or None when the heading carries no cue.
    """
    flat = _normalized(heading)
    lowered = flat.lower()
    if _NOT_A_PROHIBITION_RE.search(flat):
        return None
    if any(lowered.startswith(e) or e in lowered for e in _EMOJI_ASK) or _ASK_RE.search(flat):
        return "ask", "MUST"
    if flat.startswith(_EMOJI_NO) or _HEADING_MUST_NOT_RE.search(flat):
        return "dont", "MUST"
    if _HEADING_SHOULD_NOT_RE.search(flat):
        return "dont", "SHOULD"
    if flat.startswith(_EMOJI_YES) or _HEADING_DO_RE.match(flat.strip("*_:# ")):
        return "do", "MUST" if lowered.lstrip("✅✔☑ ").startswith("always") else "SHOULD"
    return None


def resolve_polarity(
    text: str, headings: Sequence[str], *, imperative: bool = False
) -> tuple[Polarity, Severity | None]:
    """A directive's polarity from its text, else from its nearest cue-bearing heading.

    Args:
        text: the statement.
        headings: its heading breadcrumb and list labels, outermost first.
        imperative: the statement starts with an instruction verb ("Use …"); such an item
            under a heading that is itself a statement ("Avoid global mutation") explains
            how to comply, so it keeps its own polarity.

    Returns:
        (polarity, severity the heading implies or None). The severity is only a default:
        a marker or cue word in the statement wins.
    """
    own = text_polarity(text)
    for heading in reversed(headings):
        found = heading_polarity(heading)
        if found is None:
            continue
        polarity, severity = found
        if own is None and imperative and not is_label_heading(heading):
            return "do", None
        if own is None or own == polarity:
            return polarity, severity
        if own == "do" or polarity == "do":
            return own, None
        return own, severity
    return own or "do", None


def directive_marker(severity: str, polarity: str, text: str) -> str:
    """The marker rendered before a statement: ``MUST``, ``MUST NOT``, ``ASK FIRST``…

    A prohibition whose text already negates itself ("Never log tokens") keeps the plain
    severity, so nothing reads as a double negative; one that does not ("Use `as any`" under
    "Never do") gets ``NOT``, so it can never be read as an instruction to do it.
    """
    if polarity == "ask":
        return "ASK FIRST"
    if polarity == "dont" and not negates_itself(text):
        return f"{severity} NOT"
    return severity
