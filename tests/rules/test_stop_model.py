"""The learned stopping rule measured in bench/rules_eval (``stop_model.py``), on handmade lists.

It is a measurement tool, not part of memoir's query path (RESULTS.md: not adopted); these
pin what ``tune_stop.py``'s figures rely on: it stops (never skips), keeps the first few, and
reads the probabilities it was given.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memory_core.rules.rerank import Candidate

ROOT = Path(__file__).resolve().parents[2]


def _stop_model() -> ModuleType:
    path = ROOT / "bench" / "rules_eval" / "stop_model.py"
    spec = importlib.util.spec_from_file_location("rules_eval_stop_model", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


stop_model = _stop_model()
N = len(stop_model.FEATURES)
RELEVANCE = stop_model.FEATURES.index("relevance")


def _model(threshold: float, keep_at_least: int = 1) -> object:
    # P(relevant) rises with relevance alone: logit = 10 * (relevance - 0.5).
    weights = tuple(10.0 if i == RELEVANCE else 0.0 for i in range(N))
    return stop_model.StopModel(
        weights=weights,
        bias=0.0,
        mean=tuple(0.5 if i == RELEVANCE else 0.0 for i in range(N)),
        scale=(1.0,) * N,
        threshold=threshold,
        keep_at_least=keep_at_least,
    )


def _ranked(*relevances: float) -> tuple[list[float], list[Candidate]]:
    candidates = [
        Candidate(item_id=i, total=10.0, relevance=r, semantic=r) for i, r in enumerate(relevances)
    ]
    return [100.0 - i for i in range(len(candidates))], candidates


def test_the_list_stops_at_the_first_directive_below_the_threshold_and_does_not_skip() -> None:
    scores, ranked = _ranked(0.9, 0.8, 0.2, 0.9)
    model = _model(threshold=0.5)

    assert [round(p, 3) for p in model.probabilities(scores, ranked)] == [
        0.982,
        0.953,
        0.047,
        0.982,
    ]
    # The fourth is likely relevant again, but the list stopped at the third.
    assert model.cut(scores, ranked) == 2


def test_the_first_few_are_kept_whatever_their_probability() -> None:
    scores, ranked = _ranked(0.1, 0.1, 0.1)

    assert _model(threshold=0.5, keep_at_least=2).cut(scores, ranked) == 2
    assert _model(threshold=0.0).cut(scores, ranked) == 3


def test_a_stored_model_with_other_features_is_refused() -> None:
    stored = _model(threshold=0.3).as_dict()  # type: ignore[attr-defined]
    assert stop_model.StopModel.from_dict(stored).threshold == 0.3

    with pytest.raises(ValueError, match="features"):
        stop_model.StopModel.from_dict({**stored, "features": ["rank"]})
