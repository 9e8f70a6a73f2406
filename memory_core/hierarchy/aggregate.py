"""Collect candidate chunks from the selected leaves and apply the token budget (Requirement 9).

Candidates are read leaf by leaf in the traversal's deterministic order, and within a leaf in
(created_at, chunk uid) order with keyset pagination, deduplicated by chunk id and by content
hash. Nothing is ranked or filtered by meaning here.

- :func:`collect_within_budget` (no summarising): reads chunk by chunk (one row per keyset
  read) and stops at the first chunk that would push the total over the budget, so the last row
  pulled from the database is the one that did not fit. Leaves never queried, and the leaf
  being read when none of its chunks fit, are returned as dropped paths.
- :func:`collect_for_summary`: reads every candidate up to a bound of ``max_parts`` budgets
  (every read is bounded); :func:`split_parts` then cuts the aggregate into M contiguous parts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from memory_core.errors import BudgetError
from memory_core.hierarchy.store import HierarchyChunk, HierarchyStore
from memory_core.hierarchy.traverse import SelectedPath
from memory_core.llm.keyphrases import sentences
from memory_core.scope import Scope
from memory_core.tokens import TokenCounter

__all__ = [
    "Candidate",
    "Collected",
    "Part",
    "collect_for_summary",
    "collect_within_budget",
    "part_count",
    "split_parts",
    "split_parts_with_sources",
]

log = structlog.get_logger(__name__)
_MAX_PAGE = 100
_ASSUMED_CHUNK_TOKENS = 256  # before any chunk is seen; only sizes the first page


@dataclass(frozen=True)
class Candidate:
    chunk: HierarchyChunk
    path: SelectedPath


@dataclass
class Collected:
    candidates: list[Candidate] = field(default_factory=list)
    total_tokens: int = 0
    dropped_paths: list[str] = field(default_factory=list)
    empty_leaves: list[str] = field(default_factory=list)
    rows_read: int = 0
    stopped_at: str | None = None  # uid of the first chunk left out for the budget
    stopped_tokens: int = 0  # its token count (what the budget would have needed room for)
    duplicates: int = 0


def _check_budget(budget: int) -> None:
    if budget < 1:
        raise BudgetError(
            f"max_token_budget must be at least 1, got {budget}",
            hint="pass a positive --budget / max_token_budget",
        )


def _page_size(remaining: int, tokens_seen: int, rows_seen: int) -> int:
    average = tokens_seen / rows_seen if rows_seen else _ASSUMED_CHUNK_TOKENS
    return max(1, min(_MAX_PAGE, int(remaining // max(1.0, average)) + 1))


async def collect_within_budget(
    store: HierarchyStore,
    scope: Scope,
    paths: Sequence[SelectedPath],
    budget: int,
    *,
    exact: bool = True,
) -> Collected:
    """Stream candidates in order until the next one would exceed ``budget`` tokens.

    With ``exact`` (the budget mode), chunks are pulled one row at a time, so the last row read
    is the one that did not fit: no chunk past the boundary leaves the database. Otherwise
    pages follow the remaining budget (fewer round trips, a row or two read past it).

    Raises:
        BudgetError: ``budget`` is below 1.
    """
    _check_budget(budget)
    out = Collected()
    seen_ids: set[int] = set()
    seen_hashes: set[str] = set()
    tokens_seen = 0
    for index, path in enumerate(paths):
        after: tuple[str, str] | None = None
        path_rows = 0
        path_taken = 0
        while True:
            limit = (
                1 if exact else _page_size(budget - out.total_tokens, tokens_seen, out.rows_read)
            )
            page = await store.chunks_in_category(
                scope, path.leaf.category_id, after=after, limit=limit
            )
            out.rows_read += len(page)
            path_rows += len(page)
            for chunk in page:
                tokens_seen += chunk.token_count
                if chunk.chunk_id in seen_ids or chunk.content_hash in seen_hashes:
                    out.duplicates += 1
                    continue
                if out.total_tokens + chunk.token_count > budget:
                    out.stopped_at = chunk.uid
                    out.stopped_tokens = chunk.token_count
                    # The path being read is dropped too when none of its chunks fit.
                    first_dropped = index if path_taken == 0 else index + 1
                    out.dropped_paths = [p.label for p in paths[first_dropped:]]
                    log.info(
                        "token budget reached",
                        budget=budget,
                        used=out.total_tokens,
                        dropped_paths=len(out.dropped_paths),
                    )
                    return out
                seen_ids.add(chunk.chunk_id)
                seen_hashes.add(chunk.content_hash)
                out.candidates.append(Candidate(chunk, path))
                out.total_tokens += chunk.token_count
                path_taken += 1
            if len(page) < limit:
                break
            after = (page[-1].created_at, page[-1].uid)
        if path_rows == 0:
            out.empty_leaves.append(path.label)
            log.error("selected leaf category has no chunks", path=path.label[:200])
    return out


async def collect_for_summary(
    store: HierarchyStore, scope: Scope, paths: Sequence[SelectedPath], budget: int, max_parts: int
) -> Collected:
    """Read every candidate, up to ``budget * max_parts`` tokens (then the rest is dropped).

    Raises:
        BudgetError: ``budget`` is below 1.
    """
    _check_budget(budget)
    bound = budget * max_parts
    out = await collect_within_budget(store, scope, paths, bound, exact=False)
    if out.stopped_at is not None:
        log.warning("candidates exceed the summarising bound", bound=bound, parts=max_parts)
    return out


def part_count(total_tokens: int, budget: int) -> int:
    """M = ceil(total / budget), at least 1."""
    _check_budget(budget)
    return max(1, math.ceil(total_tokens / budget))


def _pieces(text: str, limit: int, tokens: TokenCounter) -> list[str]:
    """``text`` cut at sentence ends into pieces of at most ``limit`` tokens (hard cut if needed)."""
    pieces: list[str] = []
    current = ""
    for sentence in sentences(text) or [text]:
        candidate = f"{current} {sentence}".strip()
        if tokens.count(candidate) <= limit:
            current = candidate
            continue
        if current:
            pieces.append(current)
        current = sentence
        while tokens.count(current) > limit:
            head = tokens.truncate(current, limit) or current[:1]
            pieces.append(head)
            current = current[len(head) :].lstrip()
    if current:
        pieces.append(current)
    return pieces


@dataclass(frozen=True)
class Part:
    """One contiguous part of the aggregate and the indices of the chunks it holds text of."""

    text: str
    sources: tuple[int, ...]


def split_parts_with_sources(texts: Sequence[str], parts: int, tokens: TokenCounter) -> list[Part]:
    """The aggregate of ``texts`` cut into ``parts`` contiguous parts of about equal tokens.

    Chunk boundaries are used when there are enough chunks; a chunk larger than one part is
    cut at sentence ends (hard cut as a last resort). Fewer parts come back only when the text
    cannot be cut that finely. Each part says which chunks (indices into ``texts``) it covers,
    so a summary of it can be cited by those chunks.
    """
    if not texts:
        return []
    if parts <= 1:
        return [Part("\n\n".join(texts), tuple(range(len(texts))))]
    counts = [tokens.count(t) for t in texts]
    size = max(1, math.ceil(sum(counts) / parts))
    units: list[tuple[str, int, int]] = []  # (text, tokens, source index)
    for index, (text, count) in enumerate(zip(texts, counts, strict=True)):
        if count <= size:
            units.append((text, count, index))
        else:
            units.extend((p, tokens.count(p), index) for p in _pieces(text, size, tokens))
    total = sum(u[1] for u in units)
    groups: list[list[tuple[str, int, int]]] = [[]]
    cumulative = 0
    for position, unit in enumerate(units):
        groups[-1].append(unit)
        cumulative += unit[1]
        remaining_units = len(units) - position - 1
        remaining_parts = parts - len(groups)
        boundary = total * len(groups) / parts
        if (
            remaining_parts > 0
            and remaining_units > 0
            and (cumulative >= boundary or remaining_units <= remaining_parts)
        ):
            groups.append([])
    return [
        Part("\n\n".join(u[0] for u in group), tuple(dict.fromkeys(u[2] for u in group)))
        for group in groups
        if group
    ]


def split_parts(texts: Sequence[str], parts: int, tokens: TokenCounter) -> list[str]:
    """The texts of :func:`split_parts_with_sources`."""
    return [part.text for part in split_parts_with_sources(texts, parts, tokens)]
