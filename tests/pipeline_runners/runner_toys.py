"""Toy steps with real code, looked up by `impl` like the memory layer's steps."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from memory_core.pipeline.contract import Pipeline, State, StepSpec

StepFn = Callable[[State, Mapping[str, Any]], Mapping[str, Any]]


class Flaky:
    """Fails the first `failures` calls (per instance), then succeeds."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self, state: State, config: Mapping[str, Any]) -> Mapping[str, Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"transient failure {self.calls}")
        return {"flaky_ok": True}


def _boom(state: State, config: Mapping[str, Any]) -> Mapping[str, Any]:
    raise ValueError(config.get("message", "boom"))


def _sleep(state: State, config: Mapping[str, Any]) -> Mapping[str, Any]:
    time.sleep(config["seconds"])
    return {"slept": config["seconds"]}


STEPS: dict[str, StepFn] = {
    "normalize": lambda s, c: {"text": " ".join(s["raw"].lower().split())},
    "tokenize": lambda s, c: {"tokens": s["text"].split(" ")},
    "count": lambda s, c: {"counts": {t: s["tokens"].count(t) for t in sorted(set(s["tokens"]))}},
    "top": lambda s, c: {"top": sorted(s["counts"], key=lambda t: (-s["counts"][t], t))[: c["k"]]},
    "keys_seen": lambda s, c: {"keys_seen": sorted(s)},
    "summary": lambda s, c: {"summary": {"n_tokens": len(s["tokens"]), "top": s["top"]}},
    "score": lambda s, c: {"score": round(len(s["top"]) / max(1, len(s["tokens"])), 4)},
    "boom": _boom,
    "sleep": _sleep,
}


def executor(extra: Mapping[str, StepFn] | None = None) -> Callable[[StepSpec, State], Any]:
    """An `execute_step` over the toy registry (plus `extra` impls, e.g. a `Flaky`)."""
    registry = {**STEPS, **(extra or {})}

    def execute_step(step: StepSpec, state: State) -> Mapping[str, Any]:
        return registry[step.impl](state, step.config)

    return execute_step


def step(step_id: str, impl: str | None = None, **options: Any) -> StepSpec:
    return StepSpec(step_id, impl or step_id, role=step_id, **options)


SEVEN_STEPS = Pipeline(
    "memorize",
    (
        step("normalize", produces=frozenset({"text"})),
        step("tokenize", requires=frozenset({"text"}), produces=frozenset({"tokens"})),
        step("count", requires=frozenset({"tokens"}), produces=frozenset({"counts"})),
        step("top", config={"k": 2}, produces=frozenset({"top"})),
        step("keys_seen", produces=frozenset({"keys_seen"})),
        step("summary", produces=frozenset({"summary"})),
        step("score", produces=frozenset({"score"})),
    ),
)
SEVEN_STEPS_INPUT: State = {"raw": "The cat saw  the DOG and the cat ran"}
SEVEN_STEPS_OUTPUT: State = {
    "raw": "The cat saw  the DOG and the cat ran",
    "text": "the cat saw the dog and the cat ran",
    "tokens": ["the", "cat", "saw", "the", "dog", "and", "the", "cat", "ran"],
    "counts": {"and": 1, "cat": 2, "dog": 1, "ran": 1, "saw": 1, "the": 3},
    "top": ["the", "cat"],
    "keys_seen": ["counts", "raw", "text", "tokens", "top"],
    "summary": {"n_tokens": 9, "top": ["the", "cat"]},
    "score": 0.2222,
}
