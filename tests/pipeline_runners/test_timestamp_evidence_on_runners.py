"""Timestamp evidence (seed 004 §2.2) on the durable runners: a real WAV transcribed by a
configured profile (a pydantic-ai FunctionModel) gives the same items with the same time and
span in their evidence on Burr and Temporal as on sync, on the in-memory, SQLite and PostgreSQL stores
(the timed segments cross Burr's persisted state and Temporal's JSON payloads intact)."""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.pipeline.contract import Runner, SyncRunner
from tests.pipeline.layer_kit import ALICE
from tests.pipeline_runners.conftest import BACKENDS, StoreFactory, opened_service, runner_named

TRANSCRIPT = (
    "[00:00:01] We decided to ship the mobile release on Tuesday.\n"
    "[00:00:04 - 00:00:06] The quarterly budget review moves to the third week of March."
)


def _transcriber(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(TRANSCRIPT)])


def _evidence(runner: Runner, store: Any, folder: Path) -> list[tuple[str, dict[str, Any]]]:
    recording = folder / "standup.wav"
    with wave.open(str(recording), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x10" * 8000 * 6)  # six seconds of a constant tone
    with opened_service(
        runner,
        store,
        llm_providers={
            "default": {"model": "offline"},
            "ear": {"model": FunctionModel(_transcriber)},
        },
        role_profiles={"preprocess": "ear"},
        allowed_roots=[folder],
    ) as service:
        result = service.memorize(ALICE, uri=str(recording))
        rows = service.store.items_by_id(result.items_added)
        return sorted((row.text, row.evidence[0]) for row in rows)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["burr", "temporal"])
def test_timed_evidence_is_the_same_on_every_runner(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fresh_store: StoreFactory,
    name: str,
    backend: str,
) -> None:
    on_sync = _evidence(SyncRunner(), fresh_store(backend), tmp_path)
    times = [(e["timestamp"], e["start_s"], e.get("end_s")) for _text, e in on_sync]
    assert sorted(times) == [("00:00:01", 1.0, 4.0), ("00:00:04", 4.0, 6.0)]
    runner = runner_named(request, tmp_path / "burr", name)
    assert _evidence(runner, fresh_store(backend), tmp_path) == on_sync
