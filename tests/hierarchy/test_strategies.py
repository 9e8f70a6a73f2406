"""Selections per level for the four strategies, exactly as the memoirAI spec states them."""

from __future__ import annotations

import pytest

from memory_core.errors import InvalidInputError
from memory_core.hierarchy.strategies import (
    StrategyParams,
    effective_count,
    picks_per_level,
)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("one_shot", [1, 1, 1, 1]),
        ("wide_branch", [3, 3, 3, 3]),
        ("zoom_in", [6, 4, 4, 4]),
        ("branch_out", [6, 8, 8, 8]),
    ],
)
def test_default_counts_per_level(strategy: str, expected: list[int]) -> None:
    assert [picks_per_level(strategy, level) for level in range(1, 5)] == expected  # type: ignore[arg-type]


def test_zoom_in_with_n2_larger_than_n_uses_ceil_of_n_over_n2() -> None:
    params = StrategyParams(zoom_in_n=3, zoom_in_n2=7)
    assert picks_per_level("zoom_in", 1, params) == 3
    assert picks_per_level("zoom_in", 2, params) == 1  # ceil(3/7) = 1
    params = StrategyParams(zoom_in_n=10, zoom_in_n2=4)
    assert picks_per_level("zoom_in", 2, params) == 6
    params = StrategyParams(zoom_in_n=5, zoom_in_n2=5)
    assert picks_per_level("zoom_in", 2, params) == 1  # never zero


def test_branch_out_is_capped_per_level() -> None:
    params = StrategyParams(branch_out_n=6, branch_out_n2=2, branch_out_max_per_level=7)
    assert picks_per_level("branch_out", 1, params) == 6
    assert picks_per_level("branch_out", 2, params) == 7


def test_wide_branch_n_is_configurable() -> None:
    assert picks_per_level("wide_branch", 2, StrategyParams(wide_branch_n=5)) == 5


def test_fewer_options_than_required_takes_all() -> None:
    assert effective_count(6, 2) == 2
    assert effective_count(3, 10) == 3


def test_unknown_strategy_names_the_choices() -> None:
    with pytest.raises(InvalidInputError) as info:
        picks_per_level("deep_dive", 1)  # type: ignore[arg-type]
    assert "one_shot" in (info.value.hint or "")
