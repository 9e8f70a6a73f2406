"""Walk the hierarchy for a question, level by level, per strategy (Requirements 4 and 8).

Level 1 offers the level-1 categories; each deeper level offers the children of every category
selected above it, labelled with their full path ("Science / Physics") so equal names under
different parents stay distinct. Each level is one LLM call asking for exactly the strategy's
count; a level offering no more options than that takes them all without a call.

The leaves come back in the strategy's declared order: the order of selection at level 1, then
at level 2 within it, and so on (the model lists its choices best first; options taken without
a call keep their listed order), ties broken by the category-id path ascending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from memory_core.hierarchy.store import Category, HierarchyStore
from memory_core.hierarchy.strategies import (
    Strategy,
    StrategyParams,
    effective_count,
    picks_per_level,
)
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.llm.agents import HierarchyAgents

__all__ = ["PATH_SEPARATOR", "SelectedPath", "Traversal", "traverse"]

log = structlog.get_logger(__name__)
PATH_SEPARATOR = " / "


@dataclass(frozen=True)
class SelectedPath:
    """A path of selected categories with the rank, relevance and confidence at each level."""

    categories: tuple[Category, ...]
    ranks: tuple[int, ...] = ()
    relevance: tuple[int | None, ...] = ()
    confidence: tuple[float | None, ...] = ()
    multi: tuple[bool, ...] = ()  # whether several categories were chosen at that level

    @property
    def label(self) -> str:
        return PATH_SEPARATOR.join(c.name for c in self.categories)

    @property
    def id_path(self) -> tuple[int, ...]:
        return tuple(c.category_id for c in self.categories)

    @property
    def leaf(self) -> Category:
        return self.categories[-1]

    def sort_key(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return (self.ranks, self.id_path)

    @property
    def ranked_relevance(self) -> int | None:
        """The relevance from the deepest level where several categories were chosen."""
        for rel, multi in zip(reversed(self.relevance), reversed(self.multi), strict=True):
            if multi and rel is not None:
                return rel
        return None

    @property
    def path_confidence(self) -> float | None:
        for conf, multi in zip(reversed(self.confidence), reversed(self.multi), strict=True):
            if multi and conf is not None:
                return conf
        return None

    def extend(
        self,
        category: Category,
        rank: int,
        relevance: int | None,
        confidence: float | None,
        multi: bool,
    ) -> SelectedPath:
        return SelectedPath(
            (*self.categories, category),
            (*self.ranks, rank),
            (*self.relevance, relevance),
            (*self.confidence, confidence),
            (*self.multi, multi),
        )


@dataclass
class Traversal:
    leaves: list[SelectedPath] = field(default_factory=list)
    levels: list[dict[str, Any]] = field(default_factory=list)
    dead_ends: list[str] = field(default_factory=list)


def _unique_labels(paths: list[SelectedPath], children: list[Category]) -> list[str]:
    labels: list[str] = []
    seen: set[str] = set()
    for parent, child in zip(paths, children, strict=True):
        base = PATH_SEPARATOR.join([*(c.name for c in parent.categories), child.name])
        label = base if base not in seen else f"{base} #{child.category_id}"
        seen.add(label)
        labels.append(label)
    return labels


async def traverse(
    store: HierarchyStore,
    agents: HierarchyAgents,
    *,
    scope: Scope,
    question: str,
    strategy: Strategy,
    depth: int,
    params: StrategyParams,
) -> Traversal:
    """Select categories level by level down to the leaves.

    Raises:
        ModelError: the model failed to select within its retries.
    """
    result = Traversal()
    frontier: list[SelectedPath] = [SelectedPath(())]
    for level in range(1, depth + 1):
        owners: list[SelectedPath] = []
        children: list[Category] = []
        for path in frontier:
            parent_id = path.leaf.category_id if path.categories else None
            found = await store.categories(scope, parent_id=parent_id, level=level)
            if not found and path.categories:
                result.dead_ends.append(path.label)
                log.error("category has no children below it", path=path.label[:200], level=level)
            owners.extend([path] * len(found))
            children.extend(found)
        if not children:
            break
        labels = _unique_labels(owners, children)
        wanted = picks_per_level(strategy, level, params)
        count = effective_count(wanted, len(children))
        chosen: list[tuple[int, int | None, float | None]] = []  # (option index, relevance, conf)
        called = count < len(children)
        if called:
            outcome = await agents.select(
                question=question, level=level, options=labels, count=count
            )
            index = {label: i for i, label in enumerate(labels)}
            for item in outcome.output.selected:  # type: ignore[attr-defined]
                chosen.append((index[item.category], item.ranked_relevance, item.confidence))
        else:
            chosen = [(i, None, None) for i in range(len(children))]
        multi = len(chosen) > 1
        frontier = [
            owners[i].extend(children[i], rank, relevance, confidence, multi)
            for rank, (i, relevance, confidence) in enumerate(chosen)
        ]
        result.levels.append(
            {
                "level": level,
                "options": len(children),
                "wanted": wanted,
                "selected": [
                    {"path": labels[i], "ranked_relevance": rel, "confidence": conf}
                    for i, rel, conf in chosen
                ],
                "llm_call": called,
            }
        )
    result.leaves = sorted(
        (p for p in frontier if p.categories and p.leaf.level == depth), key=SelectedPath.sort_key
    )
    return result
