"""How many categories each retrieval strategy selects per level (memoirAI Requirement 8). Pure.

Every level is one LLM call over the union of the children of the categories selected at the
level above, so the counts below are per level, not per parent:

- ``one_shot``: 1 at every level.
- ``wide_branch``: N at every level (default N = 3).
- ``zoom_in``: N at level 1, then N - N2 at each deeper level; if N2 > N, ``ceil(|N / N2|)``
  (at least 1) instead (defaults N = 6, N2 = 2). A non-positive N - N2 (N2 == N) becomes 1.
- ``branch_out``: N at level 1, then N + N2 at each deeper level, capped by the per-level
  maximum (defaults N = 6, N2 = 2).

In every case a level with fewer options than the count selects all of them
(:func:`effective_count`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from memory_core.errors import InvalidInputError

__all__ = [
    "STRATEGIES",
    "Strategy",
    "StrategyParams",
    "effective_count",
    "picks_per_level",
    "validate_strategy",
]

Strategy = Literal["one_shot", "wide_branch", "zoom_in", "branch_out"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)


@dataclass(frozen=True, slots=True)
class StrategyParams:
    wide_branch_n: int = 3
    zoom_in_n: int = 6
    zoom_in_n2: int = 2
    branch_out_n: int = 6
    branch_out_n2: int = 2
    branch_out_max_per_level: int = 12


def validate_strategy(name: str) -> Strategy:
    """Check a strategy name.

    Raises:
        InvalidInputError: not one of the four strategies.
    """
    if name not in STRATEGIES:
        raise InvalidInputError(
            f"unknown retrieval strategy {name!r}",
            hint="use one of " + ", ".join(STRATEGIES),
        )
    return name  # type: ignore[return-value]


def picks_per_level(strategy: Strategy, level: int, params: StrategyParams | None = None) -> int:
    """How many categories ``strategy`` selects at ``level`` (1-based), before capping by options.

    Raises:
        InvalidInputError: unknown strategy or a level below 1.
    """
    params = params or StrategyParams()
    validate_strategy(strategy)
    if level < 1:
        raise InvalidInputError(f"level {level} is below 1", hint="levels start at 1")
    if strategy == "one_shot":
        return 1
    if strategy == "wide_branch":
        return params.wide_branch_n
    if strategy == "zoom_in":
        n, n2 = params.zoom_in_n, params.zoom_in_n2
        if level == 1:
            return n
        if n2 > n:
            return max(1, math.ceil(abs(n / n2)))
        return max(1, n - n2)
    n, n2 = params.branch_out_n, params.branch_out_n2
    cap = params.branch_out_max_per_level
    return min(n if level == 1 else n + n2, cap)


def effective_count(wanted: int, available: int) -> int:
    """Fewer options than the strategy wants: take them all."""
    return max(0, min(wanted, available))
