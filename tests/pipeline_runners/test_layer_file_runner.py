"""The layer file's [runner] table, through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_core.errors import ConfigError
from memory_core.pipeline.layer_file import open_layer_file
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.runners.temporal_runner import TemporalRunner

LAYER = """
store = "layer.db"
scope_fields = ["org_id", "user_id"]
boundary_fields = ["org_id"]
embedder = "hash:256"
categories = [
  { key = "preferences", name = "Preferences", description = "likes, habits, food and drink" },
  { key = "work", name = "Work", description = "projects, deadlines, migrations, APIs" },
]
"""
ALICE = ("--scope", "org_id=acme", "--scope", "user_id=alice")


def memoir(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env["HOME"] = str(cwd)
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _memorize_tea(tmp_path: Path) -> dict[str, object]:
    result = memoir(
        "memorize", *ALICE, "--text", "I always drink green tea.", "--json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # stdout is exactly one JSON document: no runner or server output mixed into it
    return dict(json.loads(result.stdout))


@pytest.mark.slow
def test_a_burr_layer_keeps_its_run_state_beside_the_layer_file(tmp_path: Path) -> None:
    (tmp_path / "memoir-layer.toml").write_text(LAYER + '\n[runner]\nname = "burr"\n')

    stored = _memorize_tea(tmp_path)

    runner = BurrRunner(tmp_path)
    (app_id,) = runner.app_ids("memorize")
    saved = runner.persisted("memorize", app_id)
    assert saved is not None and saved.status == "completed"
    assert stored["items_added"] and saved.state["pipeline_revision"] == 1


@pytest.mark.slow
def test_a_temporal_layer_runs_on_a_dev_server_and_keeps_stdout_clean(tmp_path: Path) -> None:
    (tmp_path / "memoir-layer.toml").write_text(
        LAYER + '\n[runner]\nname = "temporal"\ntemporal_dev_server = true\n'
    )

    stored = _memorize_tea(tmp_path)

    assert stored["ok"] and stored["items_added"]


def test_an_unknown_runner_key_is_named(tmp_path: Path) -> None:
    layer = tmp_path / "memoir-layer.toml"
    layer.write_text(LAYER + '\n[runner]\nname = "burr"\nstate = "x.db"\n')

    with pytest.raises(ConfigError, match=r"\[runner\] has unknown keys \['state'\]"):
        open_layer_file(layer)


def test_a_temporal_layer_takes_a_fixed_task_queue(tmp_path: Path) -> None:
    layer = tmp_path / "memoir-layer.toml"
    layer.write_text(
        LAYER + '\n[runner]\nname = "temporal"\ntemporal_address = "127.0.0.1:7233"\n'
        'temporal_task_queue = "memoir-layer"\n'
    )

    service = open_layer_file(layer)  # connects on its first run, not here

    try:
        assert isinstance(service.runner, TemporalRunner)
        assert service.runner.task_queue == "memoir-layer"
    finally:
        service.close()


def test_a_temporal_layer_takes_its_heartbeat_timeout_and_worker_losses(tmp_path: Path) -> None:
    layer = tmp_path / "memoir-layer.toml"
    layer.write_text(
        LAYER + '\n[runner]\nname = "temporal"\ntemporal_address = "127.0.0.1:7233"\n'
        "heartbeat_timeout_s = 7.5\nworker_losses = 1\n"
    )

    service = open_layer_file(layer)

    try:
        assert isinstance(service.runner, TemporalRunner)
        assert (service.runner.heartbeat_timeout_s, service.runner.worker_losses) == (7.5, 1)
    finally:
        service.close()


def test_a_heartbeat_timeout_that_is_not_positive_is_named(tmp_path: Path) -> None:
    layer = tmp_path / "memoir-layer.toml"
    layer.write_text(
        LAYER + '\n[runner]\nname = "temporal"\ntemporal_address = "127.0.0.1:7233"\n'
        "heartbeat_timeout_s = 0\n"
    )

    with pytest.raises(ConfigError, match=r"heartbeat_timeout_s > 0 .*got 0"):
        open_layer_file(layer)
