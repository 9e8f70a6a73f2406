"""What each category holds, for the offline model's ``select`` (no pydantic-ai import here).

The hierarchy service knows every category's chunks; the offline model only sees option labels.
:func:`category_vectors` hands it the unit centroid of each category's chunk embeddings, keyed by
the label the traversal offers ("Beer" at level 1, "Beer / Brewing" deeper), for the duration of
one query: a context variable, so concurrent queries never see each other's tree.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

__all__ = ["category_vectors", "current_category_vectors"]

_CATEGORY_VECTORS: ContextVar[Mapping[str, np.ndarray] | None] = ContextVar(
    "memoir_category_vectors", default=None
)


@contextmanager
def category_vectors(vectors: Mapping[str, np.ndarray]) -> Iterator[None]:
    """Within the block, the offline model compares questions with these centroids."""
    token = _CATEGORY_VECTORS.set(vectors)
    try:
        yield
    finally:
        _CATEGORY_VECTORS.reset(token)


def current_category_vectors() -> Mapping[str, np.ndarray] | None:
    """The centroids set by the innermost :func:`category_vectors`, if any."""
    return _CATEGORY_VECTORS.get()
