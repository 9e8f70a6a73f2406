"""Helpers for the MCP server tests: real stores in tmp_path, real clients over real transports.

In-process tests connect the SDK's ``Client`` to the server object; subprocess tests spawn
``memoir serve`` (exactly what ``memoir serve`` runs) with the hashing
embedder, so nothing loads a model and every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
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


def make_settings(tmp_path: Path, **server: Any) -> Settings:
    overrides: dict[str, Any] = {"embedding": {"model": "hash:384"}}
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
        self, tmp_path: Path, *, scope_defaults: ScopeDefaults | None = None, **server: Any
    ):
        self.settings = make_settings(tmp_path, **server)
        self.db_url = f"sqlite:///{tmp_path / 'memoir.db'}"
        self.runtime = MemoirRuntime(
            self.settings,
            self.db_url,
            scope_defaults=scope_defaults,
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


def serve_command(db_url: str, *args: str) -> list[str]:
    """The ``memoir --db URL serve ARGS`` command line, runnable without an installed script."""
    return [sys.executable, "-c", _ENTRY, "--db", db_url, "serve", *args]
