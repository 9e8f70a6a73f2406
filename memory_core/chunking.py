"""The one chunker: text into :class:`TextChunk` values, each ``text[start:end]`` with its
token count. Pure. Two policies, one per spec, sharing the value type and the token counter:

- :func:`chunk_by_tokens` (Recall, documents): overlapping windows of whole words, each at most
  ``chunk_tokens`` tokens, consecutive windows sharing about ``overlap_tokens``. Boundaries
  depend only on the text and the settings, so chunk ids (document id + offset) are stable. A
  "word" longer than a window (minified code, a base64 blob) is cut by characters first.
- :func:`chunk_by_sentences` (memoirAI, the category hierarchy): sentences inside paragraphs,
  packed between ``min_chars`` and ``max_chars`` (details below).

Sentence packing: the text is cut into *units*: sentences (split after each configured delimiter, by default a
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory_core.errors import InvalidInputError

__all__ = [
    "DEFAULT_DELIMITERS",
    "ChunkingResult",
    "TextChunk",
    "chunk_by_sentences",
    "chunk_by_tokens",
]

DEFAULT_DELIMITERS: tuple[str, ...] = (".", "\n")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A chunk: ``text == original[start:end]`` and its exact token count."""

    start: int
    end: int
    text: str
    tokens: int


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


def chunk_by_sentences(
    text: str,
    *,
    count: Callable[[str], int],
    min_chars: int = 1000,
    max_chars: int = 2000,
    delimiters: Sequence[str] = DEFAULT_DELIMITERS,
) -> ChunkingResult:
    """Split ``text`` into chunks of ``min_chars``..``max_chars`` characters where possible.

    Args:
        text: the text to split.
        count: the token counter's ``count`` (each chunk records its tokens).
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
    return ChunkingResult(
        [TextChunk(s, e, text[s:e], count(text[s:e])) for s, e in spans], warnings
    )


# -- token windows (Recall) ------------------------------------------------------------

_PIECE = re.compile(r"\S+\s*")


def _pieces(text: str, max_piece_chars: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for match in _PIECE.finditer(text):
        start, end = match.span()
        while end - start > max_piece_chars:
            spans.append((start, start + max_piece_chars))
            start += max_piece_chars
        spans.append((start, end))
    return spans


def chunk_by_tokens(
    text: str,
    *,
    chunk_tokens: int,
    overlap_tokens: int,
    count: Callable[[str], int],
) -> list[TextChunk]:
    """Split ``text`` into overlapping chunks of at most ``chunk_tokens`` tokens.

    Args:
        text: the document text.
        chunk_tokens: the most tokens a chunk may count (>= 1).
        overlap_tokens: about how many tokens consecutive chunks share (< chunk_tokens).
        count: the token counter's ``count``.

    Raises:
        ValueError: the sizes are inconsistent.
    """
    if chunk_tokens < 1 or overlap_tokens < 0:
        raise ValueError(f"bad chunk sizes: chunk_tokens={chunk_tokens}, overlap={overlap_tokens}")
    overlap_tokens = min(overlap_tokens, chunk_tokens // 2)
    # No tokenizer packs more than ~6 characters per token on real text; this keeps a single
    # piece within a chunk's budget for any counter.
    pieces = _pieces(text, max(8, chunk_tokens * 2))
    chunks: list[TextChunk] = []
    first = 0
    guess = max(1, (chunk_tokens * 3) // 4)  # words per chunk; refined as we learn the ratio
    while first < len(pieces):
        size = min(guess, len(pieces) - first)
        body = text[pieces[first][0] : pieces[first + size - 1][1]]
        tokens = count(body)
        # Grow while it fits, shrink while it does not; a few steps settle it.
        while tokens > chunk_tokens and size > 1:
            size = max(1, min(size - 1, int(size * chunk_tokens / tokens)))
            body = text[pieces[first][0] : pieces[first + size - 1][1]]
            tokens = count(body)
        while first + size < len(pieces):
            step = max(1, int(size * (chunk_tokens - tokens) / max(tokens, 1)))
            trial = min(len(pieces) - first, size + step)
            trial_body = text[pieces[first][0] : pieces[first + trial - 1][1]]
            trial_tokens = count(trial_body)
            if trial_tokens > chunk_tokens:
                if step == 1:
                    break
                # Too far: try a single piece more before giving up.
                trial = size + 1
                trial_body = text[pieces[first][0] : pieces[first + trial - 1][1]]
                trial_tokens = count(trial_body)
                if trial_tokens > chunk_tokens:
                    break
            size, body, tokens = trial, trial_body, trial_tokens
        if tokens > chunk_tokens:  # one piece still too long for this counter: cut it
            start = pieces[first][0]
            body = body[: max(1, len(body) * chunk_tokens // max(tokens, 1))]
            while count(body) > chunk_tokens and len(body) > 1:
                body = body[: len(body) * 9 // 10]
            end = start + len(body)
            chunks.append(TextChunk(start, end, body, count(body)))
            pieces[first] = (end, pieces[first][1])
            continue
        start = pieces[first][0]
        end = pieces[first + size - 1][1]
        chunks.append(TextChunk(start, end, body, tokens))
        guess = size
        if first + size >= len(pieces):
            break
        back = int(size * overlap_tokens / max(tokens, 1)) if overlap_tokens else 0
        first += max(1, size - back)
    return chunks
