"""Helpers for the MCP server tests: real stores in tmp_path, real clients over real transports.

In-process tests connect the SDK's ``Client`` to the server object; subprocess tests spawn
``memoir serve`` (exactly what ``memoir serve`` runs) with the hashing
embedder, so nothing loads a model and every wait is bounded.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client
from mcp_types import ListRootsResult, Root

from memory_core.config import Settings, load_settings
from memory_core.embed import create_embedder
from server.mcp_app.app import MemoirMCPServer, build_server
from server.mcp_app.runtime import MemoirRuntime
from server.mcp_app.scoping import ScopeDefaults

REPO = Path(__file__).resolve().parents[2]
SAMPLE_RULES = REPO / "sample_rules"


def make_settings(tmp_path: Path, *, llm: dict[str, Any] | None = None, **server: Any) -> Settings:
    overrides: dict[str, Any] = {"embedding": {"model": "hash:384"}, "llm": llm or {}}
    if server:
        overrides["server"] = server
    return load_settings(overrides, cwd=tmp_path, environ={})


def make_project(
    root: Path, rules: tuple[str, ...] = ("api-design.md", "security-secrets.md")
) -> Path:
    """A project folder with a few of the sample rule documents under ``rules/``."""
    (root / "rules").mkdir(parents=True, exist_ok=True)
    for name in rules:
        shutil.copy(SAMPLE_RULES / name, root / "rules" / name)
    return root


def roots_callback(*folders: Path) -> Callable[..., Any]:
    async def list_roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=f.as_uri()) for f in folders])

    return list_roots


class ServerUnderTest:
    """A server built in-process over a real SQLite file."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        scope_defaults: ScopeDefaults | None = None,
        llm: dict[str, Any] | None = None,
        **server: Any,
    ):
        self.settings = make_settings(tmp_path, llm=llm, **server)
        self.db_url = f"sqlite:///{tmp_path / 'memoir.db'}"
        # The server may read tmp_path (where the tests put their projects); clients' roots
        # narrow it to one project.
        self.runtime = MemoirRuntime(
            self.settings,
            self.db_url,
            scope_defaults=scope_defaults or ScopeDefaults(workspace=tmp_path),
            embedder=create_embedder("hash:384"),
        )
        self.app: MemoirMCPServer = build_server(self.runtime)

    def client(self, *roots: Path, mode: str = "legacy", **kwargs: Any) -> Client:
        if roots:
            kwargs["list_roots_callback"] = roots_callback(*roots)
        return Client(self.app, mode=mode, **kwargs)

    async def close(self) -> None:
        await self.runtime.aclose()


def server_env(**extra: str) -> dict[str, str]:
    """Environment for a server subprocess: the repo importable, the hashing embedder, no
    config file from the developer's machine."""
    env = {
        "PYTHONPATH": str(REPO),
        "MEMOIR_EMBEDDING__MODEL": "hash:384",
        "MEMOIR_LOGGING__LEVEL": "info",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    env.update(extra)
    return env


# `python -m server.cli.main` would load main.py twice (as __main__ and as itself); the console
# script's own entry point is what `memoir` runs.
_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"


def serve_command(db_url: str, *args: str, config: Path | None = None) -> list[str]:
    """The ``memoir --db URL [--config FILE] serve ARGS`` command line, runnable without an
    installed script."""
    chosen = ["--config", str(config)] if config is not None else []
    return [sys.executable, "-c", _ENTRY, "--db", db_url, *chosen, "serve", *args]


_WAIT_S = 60
_RUNNING = re.compile(r"Uvicorn running on (http://\S+)")


@dataclass
class RunningServer:
    process: subprocess.Popen[str]
    base: str
    stderr: list[str]
    workdir: Path

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def sse_url(self) -> str:
        return f"{self.base}/sse"


def start_http_server(
    workdir: Path,
    transport: str,
    *,
    workspaces: tuple[Path, ...] | None = None,
    host: str = "127.0.0.1",
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    config: Path | None = None,
    wrapper: tuple[str, ...] = (),
    db_url: str | None = None,
) -> RunningServer:
    """``memoir serve --transport http|sse`` on a free port; returns once uvicorn reports it is
    listening (bounded wait on its log line, no polling). The server may read ``workspaces``
    (default: the folder holding ``workdir``, where pytest puts every test's projects). The
    store is ``workdir/memoir.db`` unless ``db_url`` names another (e.g. PostgreSQL)."""
    folders = workspaces if workspaces is not None else (workdir.parent,)
    command = serve_command(
        db_url or f"sqlite:///{workdir / 'memoir.db'}",
        "--transport",
        transport,
        "--host",
        host,
        "--port",
        "0",
        "--print-config",
        *(arg for folder in folders for arg in ("--workspace", str(folder))),
        *extra_args,
        config=config,
    )
    process = subprocess.Popen(
        [*wrapper, *command],
        env=server_env(**(env or {})),
        cwd=workdir,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    found = threading.Event()
    base: list[str] = []

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            match = _RUNNING.search(line)
            if match and not base:
                base.append(match.group(1))
                found.set()

    threading.Thread(target=pump, daemon=True).start()
    if not found.wait(_WAIT_S):
        process.kill()
        raise AssertionError("server did not start:\n" + "".join(lines))
    return RunningServer(process, base[0], lines, workdir)


def stop_http_server(server: RunningServer) -> int:
    server.process.send_signal(signal.SIGTERM)
    try:
        return server.process.wait(timeout=_WAIT_S)
    except subprocess.TimeoutExpired:
        server.process.kill()
        raise
