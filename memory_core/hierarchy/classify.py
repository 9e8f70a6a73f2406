"""Classify a chunk into the hierarchy: one LLM call per level, 1..depth (Requirement 2).

At each level the model sees the existing categories under the path chosen so far, so it can
reuse them. It may name a new category only while the global cap allows a whole new path below
it (a new category at level k means one new category at every level k..depth), so the cap is
never exceeded and a chunk always reaches a leaf; otherwise its output type is a ``Literal`` of
the existing names. Names are matched after normalisation, so "Databases" and "databases " are
one category.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from memory_core.errors import ModelError
from memory_core.hierarchy.store import Category, HierarchyStore, normalise_category_name
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.llm.agents import HierarchyAgents

__all__ = ["Classification", "Classifier", "may_create"]

log = structlog.get_logger(__name__)


@dataclass
class Classification:
    """Where a chunk was filed."""

    leaf: Category
    path: list[Category]
    created: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)

    @property
    def path_label(self) -> str:
        return " / ".join(c.name for c in self.path)


def may_create(existing: int, level: int, depth: int, cap: int) -> bool:
    """Whether a new category at ``level`` fits under the cap together with the path below it."""
    return existing + (depth - level + 1) <= cap


class Classifier:
    """Files chunks into the hierarchy of one store.

    Args:
        store: the hierarchy store.
        agents: the LLM steps.
        depth: hierarchy depth.
        max_categories: the global cap on categories (per scope).
    """

    def __init__(
        self, store: HierarchyStore, agents: HierarchyAgents, *, depth: int, max_categories: int
    ) -> None:
        self.store = store
        self.agents = agents
        self.depth = depth
        self.max_categories = max_categories

    async def classify(self, scope: Scope, text: str) -> Classification:
        """Choose or create a category at each level down to a leaf.

        Raises:
            ModelError: the model failed, or the cap is reached with no existing category to
                choose under the path (raise ``hierarchy.max_categories``).
        """
        existing = await self.store.count_categories(scope)
        parent: Category | None = None
        path: list[Category] = []
        created: list[str] = []
        models: list[str] = []
        for level in range(1, self.depth + 1):
            options = await self.store.categories(
                scope, parent_id=None if parent is None else parent.category_id, level=level
            )
            allow_new = may_create(existing, level, self.depth, self.max_categories)
            if not options and not allow_new:
                where = " / ".join(c.name for c in path) or "the top level"
                raise ModelError(
                    f"the category cap ({self.max_categories}) is reached and {where} has no "
                    f"category at level {level} to choose",
                    hint="raise hierarchy.max_categories, or use a smaller hierarchy.depth",
                )
            outcome = await self.agents.classify(
                text=text,
                level=level,
                depth=self.depth,
                path=[c.name for c in path],
                options=[c.name for c in options],
                allow_new=allow_new,
            )
            models.append(outcome.model_name)
            name = str(outcome.output.category)  # type: ignore[attr-defined]
            wanted = normalise_category_name(name)
            chosen = next((c for c in options if normalise_category_name(c.name) == wanted), None)
            if chosen is None:
                # Only reachable while creating is allowed: at the cap the output is a Literal.
                chosen = await self.store.create_category(
                    scope,
                    parent_id=None if parent is None else parent.category_id,
                    level=level,
                    name=name,
                )
                existing += 1
                created.append(" / ".join([*(c.name for c in path), chosen.name]))
                log.info("category created", level=level, name=chosen.name[:80])
            path.append(chosen)
            parent = chosen
        assert parent is not None  # depth >= 1
        return Classification(leaf=parent, path=path, created=created, models=models)
