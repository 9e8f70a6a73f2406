"""The memory layer reuses memoir's own LLM profiles (``memoir.toml``'s ``[llm]``) by name:
``memoir_profile = "NAME"`` in a layer profile, through the library, the CLI (a real subprocess)
and, in ``tests/server/test_layer_tools.py``, the MCP tools. Models are pydantic-ai's
``TestModel`` (the ``"test"`` model string) and ``FunctionModel``; real requests are forbidden."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.config import LLMSettings
from memory_core.errors import ConfigError, PipelineRunError
from memory_core.pipeline.llm_calls import profile_model
from memory_core.pipeline.profiles import parse_profiles
from memory_core.storage.layer.sqlite import SqliteLayerStore
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, CHAT
from tests.pipeline.test_cli import LAYER, memoir

MEMOIR_LLM = LLMSettings(
    model="offline",
    temperature=0.5,
    timeout_s=30.0,
    retries=2,
    deterministic=False,
    profiles={
        "fast": {"model": "test", "temperature": 0.2},
        "classify": {"profile": "fast", "timeout_s": 9},
    },
)


def test_a_layer_profile_takes_the_memoir_profile_and_its_own_keys_win() -> None:
    profiles = parse_profiles(
        {
            "default": {"memoir_profile": "fast"},
            "strict": {"memoir_profile": "classify", "temperature": 0.0, "retries": 5},
            "root": {"memoir_profile": "default"},
            "own": {"model": "offline"},
        },
        MEMOIR_LLM,
    )
    fast, strict, root, own = (profiles[n] for n in ("default", "strict", "root", "own"))
    # [llm.profiles.fast] over [llm]
    assert (fast.model, fast.temperature, fast.timeout_s, fast.retries) == ("test", 0.2, 30.0, 2)
    # classify -> fast through memoir's `profile =` reference; the layer's own keys win
    assert (strict.model, strict.temperature, strict.timeout_s, strict.retries) == (
        "test",
        0.0,
        9.0,
        5,
    )
    # "default" is [llm] itself
    assert (root.model, root.temperature, root.timeout_s, root.retries) == ("offline", 0.5, 30, 2)
    assert (fast.memoir_profile, strict.memoir_profile, own.memoir_profile) == (
        "fast",
        "classify",
        None,
    )
    assert fast.summary()["memoir_profile"] == "fast" and "memoir_profile" not in own.summary()


def test_memoirs_deterministic_mode_zeroes_the_temperature_it_supplies() -> None:
    llm = MEMOIR_LLM.model_copy(update={"deterministic": True})
    profiles = parse_profiles(
        {
            "default": {"memoir_profile": "fast"},
            "warm": {"memoir_profile": "fast", "temperature": 0.7},
        },
        llm,
    )
    assert profiles["default"].temperature == 0.0
    assert profiles["warm"].temperature == 0.7  # a value the layer gives itself stays


def test_a_memoir_profile_that_is_not_defined_is_refused_naming_both_profiles() -> None:
    with pytest.raises(ConfigError) as missing:
        parse_profiles(
            {"default": {"model": "offline"}, "strong": {"memoir_profile": "big"}}, MEMOIR_LLM
        )
    assert missing.value.message == (
        "llm profile 'strong' reuses the memoir profile 'big', which memoir.toml does not "
        "define (defined: classify, default, fast)"
    )
    assert "[llm.profiles.big]" in (missing.value.hint or "")
    with pytest.raises(ConfigError) as no_settings:
        parse_profiles({"default": {"memoir_profile": "fast"}})
    assert "reuses the memoir profile 'fast', but no memoir settings were given" in (
        no_settings.value.message
    )
    assert "memoir_llm=load_settings().llm" in (no_settings.value.hint or "")


def test_an_empty_llm_providers_is_refused_for_lacking_a_default_profile() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_profiles({})
    assert refused.value.message == "llm_providers has no 'default' profile (got [])"
    assert list(parse_profiles(None)) == ["default"]  # None alone means the offline default


def test_an_empty_llm_providers_creates_no_service(make_service: ServiceFactory) -> None:
    with pytest.raises(ConfigError, match="no 'default' profile"):
        make_service(llm_providers={})


def test_memorize_runs_its_llm_steps_on_the_memoir_profile(make_service: ServiceFactory) -> None:
    service = make_service(
        llm_providers={"default": {"memoir_profile": "fast"}}, memoir_llm=MEMOIR_LLM
    )
    service.memorize(ALICE, conversation=CHAT)
    run = service.runs()[0]
    assert run["status"] == "ok", run["error"]
    usage = run["llm_usage"]["extract_items"][0]
    assert (usage["profile"], usage["model"], usage["requests"]) == ("default", "test", 1)
    recorded = service.meta["providers"]["llm"]["default"]
    assert recorded == {
        "model": "test",
        "temperature": 0.2,
        "timeout_s": 30.0,
        "retries": 2,
        "output_mode": "tool",
        "memoir_profile": "fast",
    }


def test_the_memoir_profiles_parameters_reach_the_model_call(make_service: ServiceFactory) -> None:
    seen: list[dict[str, Any]] = []

    def extract(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(dict(info.model_settings or {}))
        out = {"items": [{"text": "Alice prefers dark roast coffee.", "quote": "dark roast coffee",
                          "confidence": 0.9, "stability": "stable"}]}  # fmt: skip
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(out))])

    service = make_service(
        llm_providers={
            "default": {"model": "offline"},
            # the model is the layer's own; temperature and timeout come from memoir's "classify"
            "extractor": {"memoir_profile": "classify", "model": FunctionModel(extract)},
        },
        role_profiles={"extract": "extractor"},
        memoir_llm=MEMOIR_LLM,
    )
    service.memorize(ALICE, conversation=CHAT)
    assert seen and seen[0]["temperature"] == 0.2 and seen[0]["timeout"] == 9.0


def test_a_memoir_profile_whose_provider_cannot_be_used_fails_the_run_with_the_fix(
    make_service: ServiceFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = LLMSettings(profiles={"cloud": {"model": "openai:gpt-4o-mini"}})
    service = make_service(llm_providers={"default": {"memoir_profile": "cloud"}}, memoir_llm=llm)
    with pytest.raises(PipelineRunError) as failed:
        service.memorize(ALICE, conversation=CHAT)
    text = f"{failed.value.message} {failed.value.hint}"
    assert (
        "llm profile 'default' (openai:gpt-4o-mini, from memoir profile 'cloud') cannot be used"
        in text
    )
    # the SDK is missing, or (with it installed) the key: either way the fix is named
    assert "pip install 'memoir-mcp[openai]'" in text or "OPENAI_API_KEY" in text
    assert service.runs()[0]["status"] == "failed"  # never quietly run offline instead


def test_the_cli_uses_memoir_toml_profiles_named_by_the_layer_file(tmp_path: Path) -> None:
    (tmp_path / "memoir.toml").write_text(
        '[llm]\nmodel = "offline"\ndeterministic = false\n\n'
        '[llm.profiles.fast]\nmodel = "test"\ntemperature = 0.3\n'
    )
    layer = tmp_path / "memoir-layer.toml"
    layer.write_text(
        f'store = "layer.db"\n{LAYER}\n[llm_providers.default]\nmemoir_profile = "fast"\n'
    )
    done = memoir(
        "memorize", "--scope", "org_id=acme", "--scope", "user_id=ann",
        "--text", "I always drink green tea in the afternoon.", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    store = SqliteLayerStore(tmp_path / "layer.db")
    try:
        meta = store.get_meta() or {}
        runs = store.runs(5)
    finally:
        store.close()
    assert meta["providers"]["llm"]["default"]["memoir_profile"] == "fast"
    assert meta["providers"]["llm"]["default"]["temperature"] == 0.3
    usage = runs[0].body["llm_usage"]["extract_items"][0]
    assert (usage["profile"], usage["model"]) == ("default", "test")

    layer.write_text(
        f'store = "layer.db"\n{LAYER}\n[llm_providers.default]\nmemoir_profile = "big"\n'
    )
    refused = memoir(
        "retrieve", "--scope", "org_id=acme", "--scope", "user_id=ann", "tea", cwd=tmp_path
    )
    assert refused.returncode != 0
    assert "reuses the memoir profile 'big', which memoir.toml does not define" in refused.stderr
    assert "(defined: default, fast)" in refused.stderr


HF_MODEL = "huggingface:Qwen/Qwen2.5-72B-Instruct"  # huggingface_hub ships with pydantic-ai


def test_a_profiles_api_key_env_is_the_key_its_provider_is_built_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAYER_TEST_HF_KEY", "hf-test-key")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    profile = parse_profiles(
        {"default": {"memoir_profile": "hf", "api_key_env": "LAYER_TEST_HF_KEY"}},
        LLMSettings(profiles={"hf": {"model": HF_MODEL}}),
    )["default"]
    model = profile_model(profile)
    assert model.client.token == "hf-test-key"  # not the provider's standard HF_TOKEN
    assert profile.summary()["api_key"] == {"env": "LAYER_TEST_HF_KEY"}  # recorded by name


def test_an_api_key_env_that_is_not_set_fails_the_run_naming_the_variable(
    make_service: ServiceFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAYER_TEST_HF_KEY", raising=False)
    service = make_service(
        llm_providers={"default": {"model": HF_MODEL, "api_key_env": "LAYER_TEST_HF_KEY"}}
    )
    with pytest.raises(PipelineRunError) as failed:
        service.memorize(ALICE, conversation=CHAT)
    assert (
        f"llm profile 'default' ({HF_MODEL}) takes its API key from LAYER_TEST_HF_KEY, "
        "which is not set" in failed.value.message
    )


def test_a_base_url_with_a_password_or_a_key_is_recorded_without_them(
    make_service: ServiceFactory,
) -> None:
    url = "https://svc:hunter2@llm.example/v1?api_key=abcd1234efgh5678"
    service = make_service(
        llm_providers={
            "default": {"model": "offline"},
            "remote": {"model": HF_MODEL, "base_url": url},
        }
    )
    recorded = json.dumps(service.meta)
    assert "hunter2" not in recorded and "abcd1234efgh5678" not in recorded
    assert "llm.example/v1" in recorded  # still says which endpoint


def test_a_transcription_profile_takes_its_key_from_its_api_key_env(
    make_service: ServiceFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.pipeline.test_preprocess import _wav

    monkeypatch.delenv("LAYER_TEST_EAR_KEY", raising=False)
    service = make_service(
        llm_providers={
            "default": {"model": "offline"},
            "ear": {"model": HF_MODEL, "api_key_env": "LAYER_TEST_EAR_KEY"},
        },
        role_profiles={"preprocess": "ear"},
    )
    result = service.memorize(ALICE, uri=str(_wav(tmp_path / "standup.wav", seconds=0.5)))
    [missing] = result.missing_capabilities
    assert missing["capability"] == "transcription"
    assert "LAYER_TEST_EAR_KEY, which is not set" in missing["hint"]
