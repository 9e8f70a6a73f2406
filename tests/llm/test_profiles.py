"""Named model profiles per step, deterministic mode."""

from __future__ import annotations

import pytest

from memory_core.config import LLMSettings
from memory_core.errors import ConfigError
from memory_core.llm.profiles import STEPS, resolve_profile, resolve_profiles


def test_defaults_are_offline_at_temperature_zero_for_every_step() -> None:
    profiles = resolve_profiles(LLMSettings())
    assert set(profiles) == set(STEPS)
    assert all(p.model == "offline" and p.temperature == 0.0 for p in profiles.values())
    assert all(p.retries == 3 for p in profiles.values())


def test_a_step_can_use_a_named_profile_and_override_it() -> None:
    llm = LLMSettings(
        deterministic=False,
        profiles={
            "fast": {"model": "openai:gpt-4o-mini", "temperature": 0.4, "timeout_s": 10},
            "classify": {"profile": "fast"},
            "answer": {"profile": "fast", "temperature": 0.1, "retries": 1},
        },
    )
    classify = resolve_profile(llm, "classify")
    answer = resolve_profile(llm, "answer")
    assert (classify.name, classify.model, classify.temperature, classify.timeout_s) == (
        "fast",
        "openai:gpt-4o-mini",
        0.4,
        10.0,
    )
    assert (answer.temperature, answer.retries) == (0.1, 1)
    assert resolve_profile(llm, "traverse").model == "offline"


def test_deterministic_mode_forces_temperature_zero_and_records_it() -> None:
    llm = LLMSettings(profiles={"answer": {"model": "anthropic:claude-x", "temperature": 0.9}})
    record = resolve_profile(llm, "answer").record()
    assert record["temperature"] == 0.0 and record["deterministic"] is True
    assert record["model"] == "anthropic:claude-x"


@pytest.mark.parametrize(
    "profiles",
    [
        {"classify": {"profile": "missing"}},
        {"classify": {"profile": "a"}, "a": {"profile": "classify"}},
        {"classify": {"modle": "typo"}},
        {"classify": {"temperature": "hot"}},
        {"classify": {"timeout_s": 0}},
    ],
)
def test_bad_profiles_are_config_errors_with_hints(profiles: dict) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_profile(LLMSettings(profiles=profiles), "classify")
    assert info.value.hint
