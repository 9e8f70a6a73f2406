"""From ranked chunk records to the pure packer and back to the spec's ``context`` object."""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.documents.records import ChunkRecord
from memory_core.documents.responses import ContextChunkOut, ContextOut
from memory_core.retrieval.packer import PackCandidate, pack
from memory_core.tokens import TokenCounter

__all__ = ["SEPARATOR", "pack_hits"]

SEPARATOR = "\n\n"


def pack_hits(
    chunks: Sequence[ChunkRecord],
    *,
    budget_tokens: int,
    diversity: int | None,
    tokens: TokenCounter,
) -> ContextOut:
    """Pack ranked ``chunks`` into ``budget_tokens`` with the store's token counter.

    Raises:
        BudgetError: a negative budget or diversity.
    """
    candidates = [
        PackCandidate(
            chunk_id=c.chunk_id,
            doc_id=c.doc.doc_id,
            text=c.text,
            tokens=c.tokens,
            start=c.offset,
            end=c.end_offset,
            path=c.doc.path,
            hash=c.doc.content_hash,
            mtime=c.doc.mtime,
        )
        for c in chunks
    ]
    result = pack(
        candidates,
        budget_tokens=budget_tokens,
        truncate=tokens.truncate,
        count=tokens.count,
        diversity=diversity,
        separator=SEPARATOR,
        separator_tokens=tokens.count(SEPARATOR),
    )
    return ContextOut(
        text=result.text,
        budget_tokens=result.budget_tokens,
        used_tokens=result.used_tokens,
        diversity=diversity,
        chunks=[
            ContextChunkOut(
                id=c.chunk_id,
                doc_id=c.doc_id,
                offset=c.start,
                end_offset=c.end,
                tokens=c.tokens,
                text=c.text,
                path=c.path,
                hash=c.hash,
                mtime=c.mtime,
                truncated=c.truncated,
            )
            for c in result.chunks
        ],
    )
