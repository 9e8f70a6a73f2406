"""Chunk text with stable boundaries and exact token counts.

Boundaries depend only on the text and the settings: windows of whole words (whitespace
separated), sized so each chunk counts at most ``chunk_tokens`` tokens with the configured
counter, stepping forward so consecutive chunks share about ``overlap_tokens`` tokens. The same
text always yields the same chunks, so chunk ids (document id + offset) are stable. A "word"
longer than a chunk (minified code, a base64 blob) is cut by characters first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TextChunk", "chunk_text"]

_PIECE = re.compile(r"\S+\s*")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A chunk: ``text == document[start:end]`` and its exact token count."""

    start: int
    end: int
    text: str
    tokens: int


def _pieces(text: str, max_piece_chars: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for match in _PIECE.finditer(text):
        start, end = match.span()
        while end - start > max_piece_chars:
            spans.append((start, start + max_piece_chars))
            start += max_piece_chars
        spans.append((start, end))
    return spans


def chunk_text(
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
