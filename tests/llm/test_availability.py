"""A configured provider that cannot be used says why, with the fix; never a silent fallback."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest
from pydantic_ai.exceptions import UserError

from memory_core.config import LLMSettings
from memory_core.llm.availability import MEMOIR_EXTRAS, _describe, llm_problems, model_problem

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("openai") is not None, reason="openai is installed")
def test_a_missing_sdk_names_the_memoir_extra_that_installs_it() -> None:
    problem = model_problem("openai:gpt-4o-mini")
    assert problem is not None
    assert problem.reason == "the openai SDK is not installed"
    assert problem.hint == "pip install 'memoir-mcp[openai]'"
    ollama = model_problem("ollama:llama3.2")  # ollama models talk through the OpenAI SDK
    assert ollama is not None and ollama.hint == "pip install 'memoir-mcp[openai]'"


def test_a_missing_key_names_the_variable_to_set() -> None:
    error = UserError(
        "Set the `ANTHROPIC_API_KEY` environment variable or pass it via "
        "`AnthropicProvider(api_key=...)` to use the Anthropic provider."
    )
    problem = _describe("anthropic:claude-sonnet-4-5", error)
    assert problem.reason == "ANTHROPIC_API_KEY is not set"
    assert "ANTHROPIC_API_KEY" in problem.hint


def test_an_unknown_provider_is_reported_and_the_offline_model_needs_nothing() -> None:
    problem = model_problem("nosuchprovider:model-x")
    assert problem is not None and "Unknown model" in problem.reason
    assert llm_problems(LLMSettings()) == []
    [(found, steps)] = llm_problems(LLMSettings(model="nosuchprovider:model-x"))
    assert found == problem and steps == ["classify", "traverse", "summarise", "answer"]
    assert "classify, traverse, summarise, answer used the offline model" in found.sentence(steps)


def test_every_extra_named_in_a_hint_exists_and_installs_the_providers_sdk() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    for name in MEMOIR_EXTRAS:
        assert extras[name] == [f"pydantic-ai-slim[{name}]>=2.62,<3"], name


@pytest.mark.anyio
async def test_doctor_reports_an_unusable_configured_model_with_the_fix(tmp_path: Path) -> None:
    from memory_core.config import load_settings
    from memory_core.embed import create_embedder
    from memory_core.service import diagnose

    url = f"sqlite:///{tmp_path / 'm.db'}"
    broken = load_settings({"llm": {"model": "nosuchprovider:model-x"}}, cwd=tmp_path, environ={})
    report = await diagnose(url, broken, embedder=create_embedder("hash:384"))
    [finding] = [f for f in report.findings if f.check == "llm"]
    assert finding.status == "error" and "nosuchprovider:model-x" in finding.message
    assert finding.fix and not report.ok
    fine = load_settings({}, cwd=tmp_path, environ={})
    report = await diagnose(url, fine, embedder=create_embedder("hash:384"))
    assert [f.status for f in report.findings if f.check == "llm"] == ["ok"]
