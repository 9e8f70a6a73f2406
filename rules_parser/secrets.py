"""Find likely real secrets in rule text, and redact text for logs.

Rule files are full of example credentials (``YOUR_API_KEY``, ``sk-...``, ``changeme``); a
warning for each would train people to ignore them. So every finding must look like a real
secret: a provider-specific shape (AWS, GitHub, OpenAI/Anthropic-style ``sk-``, Slack, Google,
Stripe, JWT, a private key block with a body), or a ``password = "…"``-style assignment whose
value has high entropy and is not a placeholder. Findings never carry the secret itself.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

__all__ = ["SecretFinding", "absent_in_ascii", "find_secrets", "is_placeholder", "redact"]


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A likely secret: its kind and where it is (1-based line and column, 0-based offsets).

    The secret value itself is deliberately not kept.
    """

    kind: str
    line: int
    column: int
    start: int
    end: int


# (kind, pattern, group holding the secret, literals). Provider shapes are specific enough to
# report without an entropy test; placeholders are still filtered. ``literals``: every match
# of the (case-sensitive) pattern contains one of them, so a text with none is not scanned:
# a regex pass costs 0.1-0.3 ms per 2 kB even when nothing matches (every query-run payload
# and rule document goes through here).
_SHAPES: tuple[tuple[str, re.Pattern[str], int, tuple[str, ...]], ...] = (
    (
        "aws_access_key_id",
        re.compile(r"(?<![A-Z0-9])((?:AKIA|ASIA)[0-9A-Z]{16})(?![A-Z0-9])"),
        1,
        ("AKIA", "ASIA"),
    ),
    (
        "aws_secret_access_key",
        re.compile(
            r"aws_?secret_?access_?key\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])", re.I
        ),
        1,
        (),  # case-insensitive: always scanned
    ),
    (
        "github_token",
        re.compile(r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255})\b"),
        1,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    ("github_token", re.compile(r"\b(github_pat_[A-Za-z0-9_]{22,255})\b"), 1, ("github_pat_",)),
    (
        "api_key",
        re.compile(r"(?<![\w-])(sk-(?:proj-|ant-[a-z0-9]+-|live-)?[A-Za-z0-9_\-]{20,})"),
        1,
        ("sk-",),
    ),
    ("stripe_key", re.compile(r"\b((?:sk|rk)_live_[A-Za-z0-9]{20,})\b"), 1, ("_live_",)),
    ("slack_token", re.compile(r"\b(xox[abposr]-[A-Za-z0-9-]{10,})\b"), 1, ("xox",)),
    (
        "google_api_key",
        re.compile(r"\b(AIza[0-9A-Za-z_\-]{35})(?![0-9A-Za-z_\-])"),
        1,
        ("AIza",),
    ),
    (
        "jwt",
        re.compile(r"\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,})"),
        1,
        ("eyJ",),
    ),
)

_PRIVATE_KEY_RE = re.compile(
    r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----"
    r"(?P<body>[\s\S]*?)-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----"
)

_ASSIGN_NAME = (
    r"(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?key|"
    r"auth[_-]?token|access[_-]?token|token|client[_-]?secret|private[_-]?key)\b"
)
_ASSIGN_RE = re.compile(
    # Anchored on the keyword itself (it may end a longer name: db_password, client_secret);
    # a leading [\w.-]* here made the scan backtrack at every word.
    rf"(?P<name>{_ASSIGN_NAME})"
    r"[\"']?\s*(?::=|=>|[:=])\s*(?P<q>[\"'`])(?P<value>[^\"'`\s]{8,200})(?P=q)",
    re.I,
)
# Every match of _ASSIGN_RE starts with a match of this, case ignored (see absent_in_ascii).
_ASSIGN_NAME_LOWER = re.compile(_ASSIGN_NAME)


def absent_in_ascii(text: str, lower_pattern: re.Pattern[str]) -> bool:
    """True when ``text`` is ASCII and ``lower_pattern`` finds nothing in its lower case.

    A pass of a case-ignoring keyword alternation costs 0.2-0.3 ms per 2 kB even when nothing
    matches; the same keywords, case-sensitive, over the lowered text cost a few microseconds.
    For ASCII text the two agree exactly (``str.lower`` maps A-Z to a-z and keeps every
    offset; no ASCII letter has another ASCII case partner). Non-ASCII text is never declared
    free: ``re.IGNORECASE`` also pairs ASCII letters with ``ſ``, ``K`` (Kelvin) or ``ı``, which
    ``lower`` does not map, so such a text gets the full scan.

    Args:
        text: the text about to be scanned.
        lower_pattern: a case-sensitive, lower-case pattern that every match of the full,
            case-ignoring pattern contains (so its absence proves the full one cannot match).
    """
    return text.isascii() and lower_pattern.search(text.lower()) is None


_URL_PASSWORD_RE = re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:(?P<value>[^@\s/]{6,200})@", re.I)

_PLACEHOLDER_WORDS = (
    "your",
    "example",
    "placeholder",
    "changeme",
    "change_me",
    "change-me",
    "dummy",
    "redacted",
    "sample",
    "fake",
    "xxxx",
    "****",
    "...",
    "…",
    "todo",
    "replace",
    "insert",
    "secret_here",
    "here",
    "test",
    "password",
    "token",
    "<",
    ">",
    "${",
    "{{",
    "%s",
    "env",
)


def is_placeholder(value: str) -> bool:
    """True for values that are obviously examples: ``YOUR_API_KEY``, ``<token>``, ``xxx``…

    Args:
        value: a candidate secret value.

    Returns:
        Whether the value reads as a placeholder rather than a credential.
    """
    lowered = value.lower()
    if any(word in lowered for word in _PLACEHOLDER_WORDS):
        return True
    # "xxxxxxxx", "12121212": too few distinct characters to be a generated credential.
    return len(set(lowered.replace("-", "").replace("_", ""))) <= 3


def _entropy(value: str) -> float:
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _line_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in re.finditer("\n", text))]


def _locate(starts: list[int], offset: int) -> tuple[int, int]:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1, offset - starts[lo] + 1


def find_secrets(text: str) -> list[SecretFinding]:
    """Find likely real secrets in ``text``.

    Args:
        text: any text (a whole rule document is fine).

    Returns:
        Findings sorted by position, without overlaps; each names its kind and location but
        never the value.
    """
    spans: list[tuple[int, int, str]] = []
    for kind, pattern, group, literals in _SHAPES:
        if literals and not any(literal in text for literal in literals):
            continue
        for match in pattern.finditer(text):
            value = match.group(group)
            if is_placeholder(value) or _entropy(value) < 3.0:
                continue
            spans.append((match.start(group), match.end(group), kind))
    for match in _PRIVATE_KEY_RE.finditer(text):
        body = re.sub(r"\s+", "", match.group("body"))
        # A real key body is long base64; docs show "..." or "<key>".
        if len(body) >= 64 and re.fullmatch(r"[A-Za-z0-9+/=:,-]+", body) and "..." not in body:
            spans.append((match.start(), match.end(), "private_key"))
    # Passwords in URLs are short; a lower entropy bar still rejects "password" or "pass1234".
    for pattern, kind, min_entropy, literal, keywords in (
        (_ASSIGN_RE, "credential_assignment", 3.0, "", _ASSIGN_NAME_LOWER),
        (_URL_PASSWORD_RE, "url_password", 2.5, "://", None),  # not a letter: no case to ignore
    ):
        if literal not in text or (keywords is not None and absent_in_ascii(text, keywords)):
            continue
        for match in pattern.finditer(text):
            value = match.group("value")
            if is_placeholder(value) or _entropy(value) < min_entropy:
                continue
            # A value with no digit and no symbol is usually a word or identifier.
            if not re.search(r"[\d\W_]", value):
                continue
            spans.append((match.start("value"), match.end("value"), kind))
    if not spans:
        return []
    spans.sort()
    starts = _line_starts(text)
    findings: list[SecretFinding] = []
    last_end = -1
    for start, end, kind in spans:
        if start < last_end:  # overlapping shapes: the first (most specific) one wins
            continue
        line, column = _locate(starts, start)
        findings.append(SecretFinding(kind, line, column, start, end))
        last_end = end
    return findings


def redact(text: str) -> str:
    """Replace every likely secret in ``text`` with ``[REDACTED:<kind>]``, for logging.

    Args:
        text: any text.

    Returns:
        The text with secrets replaced; unchanged when none are found.
    """
    findings = find_secrets(text)
    if not findings:
        return text
    out: list[str] = []
    pos = 0
    for finding in findings:
        out.append(text[pos : finding.start])
        out.append(f"[REDACTED:{finding.kind}]")
        pos = finding.end
    out.append(text[pos:])
    return "".join(out)
