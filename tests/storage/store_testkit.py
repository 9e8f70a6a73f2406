"""Shared values of the storage contract suite (importable by name from its test modules)."""

from __future__ import annotations

import numpy as np
import pytest

__all__ = ["DIM", "STORE_BACKENDS", "unit_vectors"]

DIM = 8
STORE_BACKENDS = [pytest.param("sqlite", id="sqlite")]


def unit_vectors(count: int, seed: int = 0) -> np.ndarray:
    """``count`` random unit vectors of :data:`DIM` dimensions (float32)."""
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(count, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
