"""runner_from_settings: the three names, and errors that say what to set or install."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from memory_core.errors import ConfigError
from memory_core.pipeline.contract import SyncRunner
from memory_core.pipeline.runners import RUNNER_NAMES, runner_from_settings
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.runners.temporal_runner import TemporalRunner


def test_the_three_runner_names() -> None:
    assert RUNNER_NAMES == ("sync", "burr", "temporal")


def test_sync_is_the_contracts_sync_runner() -> None:
    assert isinstance(runner_from_settings("sync"), SyncRunner)


def test_an_unknown_name_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match="unknown pipeline runner 'celery'") as caught:
        runner_from_settings("celery")
    assert caught.value.hint == "choose one of sync, burr, temporal"


def test_burr_keeps_its_state_in_the_stores_folder(tmp_path: Path) -> None:
    runner = runner_from_settings("burr", store_dir=tmp_path)

    assert isinstance(runner, BurrRunner)
    assert runner.state_path == tmp_path / "burr_state.db"


def test_burr_prefers_an_explicit_state_path(tmp_path: Path) -> None:
    runner = runner_from_settings("burr", store_dir=tmp_path, state_path=tmp_path / "runs.db")

    assert isinstance(runner, BurrRunner) and runner.state_path == tmp_path / "runs.db"


def test_burr_without_a_place_for_its_state_is_refused() -> None:
    with pytest.raises(ConfigError, match="given no place") as caught:
        runner_from_settings("burr")
    assert "state_path=" in (caught.value.hint or "")


def test_temporal_without_a_server_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs a Temporal server") as caught:
        runner_from_settings("temporal")
    assert "temporal_address=" in (caught.value.hint or "")


def test_temporal_is_configured_from_settings() -> None:
    runner = runner_from_settings(
        "temporal", temporal_address="127.0.0.1:7233", temporal_namespace="memoir"
    )

    assert isinstance(runner, TemporalRunner)
    assert (runner.address, runner.namespace, runner.dev_server) == (
        "127.0.0.1:7233",
        "memoir",
        False,
    )


def test_temporal_address_and_dev_server_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="exactly one of address= and dev_server=True"):
        runner_from_settings(
            "temporal", temporal_address="127.0.0.1:7233", temporal_dev_server=True
        )


@pytest.mark.parametrize(
    ("name", "library", "extra"),
    [("burr", "burr", "burr"), ("temporal", "temporalio", "temporal")],
)
def test_a_runner_whose_extra_is_missing_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, library: str, extra: str
) -> None:
    # None in sys.modules makes `import <library>` fail as if it were not installed.
    for module in [m for m in sys.modules if m == library or m.startswith(f"{library}.")]:
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, f"memory_core.pipeline.runners.{name}_runner")

    with pytest.raises(ConfigError, match=f"needs the '{library}' package") as caught:
        runner_from_settings(name, store_dir=tmp_path, temporal_dev_server=True)
    assert caught.value.hint == f"pip install 'memoir-mcp[{extra}]' (or choose runner 'sync')"


def test_an_unreachable_temporal_server_is_named(tmp_path: Path) -> None:
    runner = TemporalRunner(address="127.0.0.1:1")

    with pytest.raises(
        ConfigError, match=re.escape("cannot reach the Temporal server at '127.0.0.1:1'")
    ):
        runner.start()
