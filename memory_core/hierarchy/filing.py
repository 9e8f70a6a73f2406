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
from memory_core.hierarchy.classify import Classification
from memory_core.hierarchy.offline_tree import OfflineTree
from memory_core.hierarchy.store import HierarchyStore
from memory_core.hierarchy.tree_port import tree_port_for

if TYPE_CHECKING:
    from memory_core.llm.agents import HierarchyAgents

__all__ = ["file_offline", "offline_tree_for"]


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
    scope: str,
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
