"""The deterministic token-budget packer behind ``memoir context``.

Pure: candidates in, packed window out. Candidates arrive ranked (the query's ordering); the
packer walks them in that order, skips repeated chunk ids, skips a document's chunks beyond
the diversity cap, and stops at the first chunk that does not fit whole, which it
prefix-truncates into the remaining budget. The budget counts each chunk's stored token count
plus the separator between chunks, and is never exceeded. Same input, same output, always.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from memory_core.errors import BudgetError

__all__ = ["PackCandidate", "PackResult", "pack"]


@dataclass(frozen=True, slots=True)
class PackCandidate:
    """A chunk offered to the packer, with what it needs for provenance."""

    chunk_id: str
    doc_id: str
    text: str
    tokens: int
    start: int = 0
    end: int = 0
    path: str = ""
    hash: str = ""
    mtime: str | None = None
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class PackResult:
    """The packed window."""

    chunks: tuple[PackCandidate, ...]
    used_tokens: int
    budget_tokens: int
    text: str
    skipped_duplicates: int
    skipped_diversity: int
    truncated: bool


def pack(
    candidates: Sequence[PackCandidate],
    *,
    budget_tokens: int,
    truncate: Callable[[str, int], str],
    count: Callable[[str], int],
    diversity: int | None = None,
    separator: str = "\n\n",
    separator_tokens: int = 1,
) -> PackResult:
    """Pack ranked ``candidates`` into ``budget_tokens``.

    Args:
        candidates: ranked best first.
        budget_tokens: the hard budget (>= 0).
        truncate: ``(text, max_tokens) -> prefix`` of the configured token counter.
        count: the token counter's ``count`` (used for a truncated chunk only).
        diversity: at most this many chunks per document (None or 0: no cap).
        separator: placed between chunks in ``text``.
        separator_tokens: what one separator costs against the budget.

    Raises:
        BudgetError: the budget or the diversity cap is negative.
    """
    if budget_tokens < 0:
        raise BudgetError(
            f"the token budget cannot be negative, got {budget_tokens}",
            hint="pass --budget-tokens with a positive number",
        )
    if diversity is not None and diversity < 0:
        raise BudgetError(
            f"the diversity cap cannot be negative, got {diversity}",
            hint="pass --diversity 0 (no cap) or a positive number of chunks per document",
        )
    packed: list[PackCandidate] = []
    seen: set[str] = set()
    per_doc: dict[str, int] = {}
    used = 0
    duplicates = diversity_skips = 0
    truncated = False
    for candidate in candidates:
        if candidate.chunk_id in seen:
            duplicates += 1
            continue
        if diversity and per_doc.get(candidate.doc_id, 0) >= diversity:
            diversity_skips += 1
            continue
        cost_sep = separator_tokens if packed else 0
        remaining = budget_tokens - used - cost_sep
        if remaining <= 0:
            break
        seen.add(candidate.chunk_id)
        if candidate.tokens <= remaining:
            packed.append(candidate)
            used += cost_sep + candidate.tokens
            per_doc[candidate.doc_id] = per_doc.get(candidate.doc_id, 0) + 1
            continue
        # The last chunk: its longest prefix within the remaining budget, if any text fits.
        prefix = truncate(candidate.text, remaining)
        tokens = count(prefix) if prefix else 0
        if prefix and 0 < tokens <= remaining:
            packed.append(
                replace(
                    candidate,
                    text=prefix,
                    tokens=tokens,
                    end=candidate.start + len(prefix),
                    truncated=True,
                )
            )
            used += cost_sep + tokens
            truncated = True
        break
    return PackResult(
        chunks=tuple(packed),
        used_tokens=used,
        budget_tokens=budget_tokens,
        text=separator.join(c.text for c in packed),
        skipped_duplicates=duplicates,
        skipped_diversity=diversity_skips,
        truncated=truncated,
    )
