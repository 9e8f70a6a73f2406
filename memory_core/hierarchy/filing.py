"""How new chunks are filed: by the offline classifier's clusters, or by a model level by level.

The offline clustering classifier (:mod:`memory_core.hierarchy.offline_tree`) files a chunk when
no model but the built-in offline one is left to classify (no provider configured or usable, no
MCP sampling), the store has the tree port, and ``hierarchy.offline_classifier`` is
``"clusters"``. Otherwise a model classifies each chunk (:class:`~memory_core.hierarchy.classify.Classifier`),
and a tree the clustering classifier managed becomes curated: model-chosen names are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memory_core.config import HierarchySettings
from memory_core.errors import InvalidInputError
from memory_core.hierarchy.classify import Classification, may_create
from memory_core.hierarchy.clustering import normalise_rows
from memory_core.hierarchy.labels import name_path
from memory_core.hierarchy.offline_tree import OfflineTree
from memory_core.hierarchy.proposed import match_name, parse_category_path
from memory_core.hierarchy.store import Category, HierarchyStore
from memory_core.hierarchy.tree_port import tree_port_for
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.hierarchy.classify import Classifier
    from memory_core.llm.agents import HierarchyAgents

__all__ = [
    "AGENT_CLASSIFIER",
    "FILING_ATTEMPTS",
    "file_again",
    "file_offline",
    "file_proposed",
    "offline_tree_for",
]

AGENT_CLASSIFIER = "agent-proposed"
# Chunks whose leaf another process deleted meanwhile are filed again, this many times at most.
FILING_ATTEMPTS = 3


def offline_tree_for(store: HierarchyStore, settings: HierarchySettings) -> OfflineTree | None:
    """The clustering classifier of ``store``, or None (setting ``names``, or no tree port)."""
    if settings.offline_classifier != "clusters":
        return None
    port = tree_port_for(store)
    return None if port is None else OfflineTree(store, port, settings)


async def file_offline(
    store: HierarchyStore,
    agents: HierarchyAgents,
    settings: HierarchySettings,
    scope: Scope,
    texts: Sequence[str],
    vectors: np.ndarray | None,
    token_counts: Sequence[int],
) -> list[Classification] | None:
    """Where each of ``texts`` goes, or None when a model is to classify them one by one."""
    if not texts or vectors is None:
        return None
    tree = offline_tree_for(store, settings)
    if tree is None:
        return None
    if not agents.models["classify"].offline_only:
        await tree.release(scope, "a model classifies")
        return None
    return await tree.file(scope, texts, vectors, token_counts)


async def file_proposed(
    store: HierarchyStore,
    settings: HierarchySettings,
    scope: Scope,
    proposal: str | Sequence[str],
    texts: Sequence[str],
    vectors: np.ndarray | None,
    warnings: list[str],
) -> list[Classification]:
    """File every one of ``texts`` under the path the caller proposed (see
    :mod:`memory_core.hierarchy.proposed`); a match to an existing name is added to ``warnings``.

    Raises:
        InvalidInputError: the path is malformed or too deep, or a new category is needed and
            the cap is reached (the message lists the categories to choose from).
    """
    names = parse_category_path(proposal, depth=settings.depth)
    if not texts:  # everything was already stored: nothing to file, nothing to create
        return []
    existing = await store.count_categories(scope)
    path: list[Category] = []
    created: list[str] = []
    for level, name in enumerate(names, start=1):
        parent = path[-1] if path else None
        options = await store.categories(
            scope, parent_id=None if parent is None else parent.category_id, level=level
        )
        match = match_name(name, options)
        if match is not None:
            if not match.exact:
                warnings.append(f"category {name!r} matched the existing {match.category.name!r}")
            path.append(match.category)
            continue
        _check_room(existing, level, settings, name, path, options)
        path.append(
            await store.create_category(
                scope,
                parent_id=None if parent is None else parent.category_id,
                level=level,
                name=name,
            )
        )
        existing += 1
        created.append(" / ".join(c.name for c in path))
    tree = offline_tree_for(store, settings)
    if tree is not None:
        await tree.release(scope, "an agent chose categories")
    if len(path) == settings.depth:
        return [
            Classification(path[-1], list(path), created if i == 0 else [], [AGENT_CLASSIFIER])
            for i in range(len(texts))
        ]
    centroids = await tree.centroids(scope) if tree is not None else {}
    unit = normalise_rows(np.asarray(vectors)) if vectors is not None else None
    filed: list[Classification] = []
    for index, text in enumerate(texts):
        full = list(path)
        made = created if index == 0 else []
        while len(full) < settings.depth:
            level = len(full) + 1
            options = await store.categories(scope, parent_id=full[-1].category_id, level=level)
            if options:
                full.append(
                    _nearest(options, full, centroids, None if unit is None else unit[index])
                )
                continue
            _check_room(existing, level, settings, "(a new category)", full, options)
            for name in name_path(
                text, [], settings.depth - len(full), avoid=[c.name for c in full]
            ):
                full.append(
                    await store.create_category(
                        scope, parent_id=full[-1].category_id, level=len(full) + 1, name=name
                    )
                )
                existing += 1
                made = [*made, " / ".join(c.name for c in full)]
        filed.append(Classification(full[-1], full, made, [AGENT_CLASSIFIER]))
    return filed


def _nearest(
    options: Sequence[Category],
    path: Sequence[Category],
    centroids: dict[str, np.ndarray],
    vector: np.ndarray | None,
) -> Category:
    prefix = " / ".join(c.name for c in path)
    scored = [
        (float(centroids[f"{prefix} / {o.name}"] @ vector), -i)
        for i, o in enumerate(options)
        if vector is not None and f"{prefix} / {o.name}" in centroids
    ]
    if not scored:
        return options[0]
    return options[-max(scored)[1]]


def _check_room(
    existing: int,
    level: int,
    settings: HierarchySettings,
    name: str,
    path: Sequence[Category],
    options: Sequence[Category],
) -> None:
    if may_create(existing, level, settings.depth, settings.max_categories):
        return
    where = " / ".join(c.name for c in path) or "the top level"
    listed = ", ".join(repr(o.name) for o in options[:20]) or "none"
    raise InvalidInputError(
        f"cannot create category {name!r} under {where}: the tree holds {existing} of its "
        f"{settings.max_categories} categories",
        hint=f"choose an existing category there ({listed}), or raise hierarchy.max_categories",
    )


async def file_again(
    store: HierarchyStore,
    agents: HierarchyAgents,
    settings: HierarchySettings,
    scope: Scope,
    proposal: str | Sequence[str] | None,
    text: str,
    vector: np.ndarray | None,
    token_count: int,
    classifier: Classifier,
    warnings: list[str],
) -> Classification:
    """Where one chunk goes in the tree as it is now: its leaf vanished between the filing and
    the write (another process re-clustered the tree or removed the category), so it is filed
    the way it was the first time (the proposed path, the offline clusters or the model)."""
    if proposal is not None:
        return (await file_proposed(store, settings, scope, proposal, [text], vector, warnings))[0]
    placed = await file_offline(store, agents, settings, scope, [text], vector, [token_count])
    if placed is not None:
        return placed[0]
    return await classifier.classify(scope, text)
