"""One redactor for every surface: tool results, resources, prompts, REST, CLI output, exports,
category names and logs.

It knows everything :func:`rules_parser.find_secrets` knows (provider-shaped keys, JWTs,
``password = "…"`` assignments, URL passwords) and adds what an output boundary also needs:

- **private-key blocks**, whatever their body (even a short or elided one), up to the END line
  or, when it is missing, the end of the text;
- **bearer credentials** (``Authorization: Bearer …``, ``Basic …``, ``token …``);
- **assignments** quoted, unquoted (``API_KEY=…`` as in a ``.env`` file) or JSON-escaped
  (``\\"…\\"`` inside an export line);
- **high-entropy strings**: 32+ characters of a token alphabet mixing upper case, lower case
  and digits, or the 40-character base64 shape of a cloud secret key, above 4 bits of entropy
  per character. Lower-case hex (hashes, ids, commit SHAs) and words never qualify.

Every finding becomes ``[REDACTED:<kind>]``. Placeholders (``YOUR_API_KEY``, ``<token>``,
``sk-...``) stay as they are: rule documents are full of them. Redaction is idempotent, and the
marker contains no quote or backslash, so it is safe inside serialised JSON too.
"""

from __future__ import annotations

import io
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import IO, Any

from rules_parser.secrets import absent_in_ascii, find_secrets, is_placeholder

__all__ = [
    "REDACTED_PREFIX",
    "RedactingWriter",
    "contains_secret",
    "redact_text",
    "redact_value",
    "secret_spans",
]

REDACTED_PREFIX = "[REDACTED:"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*\Z)"
)
_BEARER_NAME = r"\b(?:bearer|basic|token)"
_BEARER = re.compile(rf"(?i){_BEARER_NAME}(?:\s+|\s*[:=]\s*)(?P<value>[A-Za-z0-9\-._~+/]{{16,}}=*)")
_ASSIGNMENT_NAME = (
    r"(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?key|auth[_-]?token|"
    r"access[_-]?token|client[_-]?secret|private[_-]?key)"
)
# Quoted, unquoted (.env style) and JSON-escaped (\"…\" inside an export line) assignments.
_ASSIGNMENT = re.compile(
    rf"(?i){_ASSIGNMENT_NAME}\w*\\?[\"']?\s*(?::=|=>|[:=])\s*"
    r"\\?[\"'`]?(?P<value>[^\s\"'`,;\\\]\)\}]{8,200})"
)
# What every match of each starts with, case-sensitive, for rules_parser's absent_in_ascii:
# a bearer keyword is followed by a space, ':' or '='; an assignment name by anything.
_BEARER_LOWER = re.compile(rf"{_BEARER_NAME}[\s:=]")
_ASSIGNMENT_LOWER = re.compile(_ASSIGNMENT_NAME)
_TOKEN_RUN = re.compile(r"(?<![A-Za-z0-9_\-+=])[A-Za-z0-9_\-+]{32,}={0,2}(?![A-Za-z0-9_\-+=])")
_BASE64_40 = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")

_MIN_ENTROPY = 4.0
# Random base64 switches class (upper / lower / digit / symbol) at ~60 % of positions.
_MIN_SWITCH_RATE = 0.3


def _entropy(value: str) -> float:
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _char_class(char: str) -> int:
    return 0 if char.isupper() else 1 if char.islower() else 2 if char.isdigit() else 3


def _looks_random(value: str) -> bool:
    """Mixed case and digits, high entropy, frequent switches between character classes (a
    CamelCase identifier switches rarely), not a placeholder: a generated credential."""
    core = value.strip("=")
    classes = [_char_class(c) for c in core]
    switches = sum(a != b for a, b in itertools.pairwise(classes))
    return (
        {0, 1, 2} <= set(classes)
        and switches >= _MIN_SWITCH_RATE * len(core)
        and _entropy(core) >= _MIN_ENTROPY
        and not is_placeholder(core)
    )


def _credential_value(value: str) -> bool:
    """An assigned or bearer value that is a real credential, not ``${VAR}`` or ``changeme``."""
    return (
        not is_placeholder(value)
        and _entropy(value) >= 3.0
        and bool(re.search(r"[\d\W_]", value))
        and REDACTED_PREFIX not in value
    )


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """Every likely secret in ``text`` as (start, end, kind), sorted, without overlaps."""
    spans: list[tuple[int, int, str]] = [
        (f.start, f.end, f.kind) for f in find_secrets(text) if f.kind != "private_key"
    ]
    spans += [(m.start(), m.end(), "private_key") for m in _PRIVATE_KEY.finditer(text)]
    for pattern, keywords, kind in (
        (_BEARER, _BEARER_LOWER, "bearer_token"),
        (_ASSIGNMENT, _ASSIGNMENT_LOWER, "credential"),
    ):
        if absent_in_ascii(text, keywords):
            continue
        for match in pattern.finditer(text):
            if _credential_value(match.group("value")):
                spans.append((match.start("value"), match.end("value"), kind))
    for pattern in (_TOKEN_RUN, _BASE64_40):
        for match in pattern.finditer(text):
            if _looks_random(match.group()):
                spans.append((match.start(), match.end(), "high_entropy"))
    if not spans:
        return []
    # Widest first at each start, then drop anything inside an earlier span.
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    kept: list[tuple[int, int, str]] = []
    for span in spans:
        if kept and span[0] < kept[-1][1]:
            if span[1] > kept[-1][1]:  # overlapping tails: merge into the earlier span
                kept[-1] = (kept[-1][0], span[1], kept[-1][2])
            continue
        kept.append(span)
    return kept


def redact_text(text: str) -> str:
    """``text`` with every likely secret replaced by ``[REDACTED:<kind>]``."""
    spans = secret_spans(text)
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end, kind in spans:
        out.append(text[pos:start])
        out.append(f"{REDACTED_PREFIX}{kind}]")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def contains_secret(text: str) -> bool:
    return bool(secret_spans(text))


def redact_value(value: Any) -> Any:
    """A JSON-like value with every string redacted (mapping keys are left alone)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value)
    return value


class RedactingWriter(io.TextIOBase):
    """A text stream that redacts everything written through it before passing it on.

    Wraps a CLI's stdout and stderr and an export file. ``buffer`` (binary writes, e.g. the MCP
    stdio wire, whose results are redacted where they are made) goes to the wrapped stream's.
    Each ``write`` is redacted on its own: callers write whole messages or lines.
    """

    def __init__(self, target: IO[str]) -> None:
        super().__init__()
        self._target = target

    @property
    def target(self) -> IO[str]:
        """The wrapped stream (for output that is redacted where it is made, such as backup
        records whose base64 vectors must pass untouched)."""
        return self._target

    def write(self, text: str) -> int:
        self._target.write(redact_text(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:  # type: ignore[override]
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._target.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._target, "errors", "strict")

    @property
    def buffer(self) -> Any:
        return self._target.buffer  # type: ignore[attr-defined]
