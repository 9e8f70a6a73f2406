"""Split text into chunks for the category hierarchy (memoirAI Requirements 2 and 7). Pure.

The text is cut into *units*: sentences (split after each configured delimiter, by default a
period or a line break) inside paragraphs (split at blank lines). Units are packed greedily:

- a chunk is closed at a paragraph end once it holds at least ``min_chars`` characters, so
  paragraph boundaries are kept whenever the lengths allow;
- a chunk is closed before a unit that would push it over ``max_chars``, so chunks break at
  sentence boundaries inside long paragraphs;
- a unit longer than ``max_chars`` on its own (a sentence without delimiters) is cut at the last
  whitespace before the limit, or hard at the limit: long text is always split, never an error;
- a short tail is merged into the previous chunk when both fit in ``max_chars``.

Text shorter than ``min_chars`` becomes one chunk with a warning (it is kept, not refused).
Each chunk keeps its character offsets into the original text, and its text is exactly
``text[start:end]``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.errors import InvalidInputError

__all__ = ["DEFAULT_DELIMITERS", "ChunkingResult", "TextChunk", "chunk_text"]

DEFAULT_DELIMITERS: tuple[str, ...] = (".", "\n")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One chunk: its text and where it sits in the original."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ChunkingResult:
    chunks: list[TextChunk]
    warnings: list[str]


@dataclass(frozen=True, slots=True)
class _Unit:
    start: int
    end: int
    ends_paragraph: bool


def _paragraph_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    position = 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        spans.append((position, match.start()))
        position = match.end()
    spans.append((position, len(text)))
    return [_strip_span(text, s, e) for s, e in spans if text[s:e].strip()]


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _sentence_spans(
    text: str, start: int, end: int, pattern: re.Pattern[str]
) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    position = start
    for match in pattern.finditer(text, start, end):
        cut = match.end()
        if text[position:cut].strip():
            spans.append(_strip_span(text, position, cut))
        position = cut
    if text[position:end].strip():
        spans.append(_strip_span(text, position, end))
    return spans


def _hard_split(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut an over-long unit at the last whitespace before ``max_chars`` (else exactly there)."""
    spans: list[tuple[int, int]] = []
    while end - start > max_chars:
        window_end = start + max_chars
        cut = window_end
        # Prefer a word boundary in the second half of the window (not a tiny first piece).
        for index in range(window_end, start + max_chars // 2, -1):
            if text[index - 1].isspace():
                cut = index
                break
        piece = _strip_span(text, start, cut)
        if piece[1] > piece[0]:
            spans.append(piece)
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        spans.append((start, end))
    return spans


def _delimiter_pattern(delimiters: Sequence[str]) -> re.Pattern[str]:
    parts = [re.escape(d) for d in delimiters if d]
    if not parts:
        raise InvalidInputError(
            "no chunk delimiters configured",
            hint='set hierarchy.chunk_delimiters, e.g. [".", "\\n"]',
        )
    # A period only ends a sentence before whitespace or the end ("3.14", "e.g.x" stay whole).
    alternatives = [
        f"{p}(?=\\s|$)" if not d.isspace() else p for p, d in zip(parts, delimiters, strict=False)
    ]
    return re.compile("|".join(alternatives))


def _units(text: str, max_chars: int, pattern: re.Pattern[str]) -> list[_Unit]:
    units: list[_Unit] = []
    for p_start, p_end in _paragraph_spans(text):
        sentences = _sentence_spans(text, p_start, p_end, pattern)
        pieces = [
            piece
            for s_start, s_end in sentences
            for piece in _hard_split(text, s_start, s_end, max_chars)
        ]
        for index, (u_start, u_end) in enumerate(pieces):
            units.append(_Unit(u_start, u_end, ends_paragraph=index == len(pieces) - 1))
    return units


def chunk_text(
    text: str,
    *,
    min_chars: int = 1000,
    max_chars: int = 2000,
    delimiters: Sequence[str] = DEFAULT_DELIMITERS,
) -> ChunkingResult:
    """Split ``text`` into chunks of ``min_chars``..``max_chars`` characters where possible.

    Args:
        text: the text to split.
        min_chars: a chunk is closed at a paragraph end once it is at least this long.
        max_chars: no chunk is longer than this.
        delimiters: strings after which a sentence ends (a period counts only before
            whitespace or the end of the text).

    Returns:
        The chunks (in text order, each ``text[start:end]``) and any warnings (short text,
        short tail).

    Raises:
        InvalidInputError: the limits are inconsistent or no delimiter is configured.
    """
    if min_chars < 1 or max_chars < min_chars:
        raise InvalidInputError(
            f"invalid chunk limits min_chars={min_chars}, max_chars={max_chars}",
            hint="use 1 <= hierarchy.min_chunk_chars <= hierarchy.max_chunk_chars",
        )
    pattern = _delimiter_pattern(delimiters)
    warnings: list[str] = []
    stripped = text.strip()
    if not stripped:
        return ChunkingResult([], ["empty text: nothing to ingest"])
    units = _units(text, max_chars, pattern)
    spans: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for unit in units:
        if current is not None and unit.end - current[0] > max_chars:
            spans.append(current)
            current = None
        current = (unit.start, unit.end) if current is None else (current[0], unit.end)
        if unit.ends_paragraph and current[1] - current[0] >= min_chars:
            spans.append(current)
            current = None
    if current is not None:
        spans.append(current)
    # A short tail joins the chunk before it when the two fit together.
    short_tail = len(spans) >= 2 and spans[-1][1] - spans[-1][0] < min_chars
    if short_tail and spans[-1][1] - spans[-2][0] <= max_chars:
        spans[-2:] = [(spans[-2][0], spans[-1][1])]
    if len(stripped) < min_chars:
        warnings.append(
            f"text of {len(stripped)} characters is below the minimum chunk size "
            f"({min_chars}); kept as one chunk"
        )
    elif spans and spans[-1][1] - spans[-1][0] < min_chars and len(spans) > 1:
        warnings.append(
            f"last chunk has {spans[-1][1] - spans[-1][0]} characters, below the minimum "
            f"({min_chars}); kept"
        )
    return ChunkingResult([TextChunk(text[s:e], s, e) for s, e in spans], warnings)
