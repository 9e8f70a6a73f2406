"""A newcomer's first hour: a fresh clone, `make run`'s steps, then the `mcp.json` server.

The clone is a copy of every tracked file into a new git repository; `make store` (the steps
`make run` takes before serving) runs in it with this checkout's virtualenv; then the server of
the clone's `mcp.json` is started exactly as a client would (its command, args and env, from the
clone's folder) over stdio with the SDK's client, and must answer `query_directives` from the
sample rules: one store and one scope for every entry point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_testkit import REPO

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

_WAIT_S = 120
VENV = Path(sys.executable).parent.parent


def fresh_clone(target: Path) -> Path:
    """Every tracked file of this checkout (as it is on disk) in a new git repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    return target


def clean_env(home: Path) -> dict[str, str]:
    """A user's environment: this checkout's tools on PATH, a HOME of its own, no MEMOIR_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PATH"] = os.pathsep.join([str(VENV / "bin"), env.get("PATH", "")])
    env["HOME"] = str(home)
    return env


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
async def test_a_fresh_clone_make_run_then_the_mcp_json_server_answers_from_the_sample_rules(
    tmp_path: Path,
) -> None:
    clone = fresh_clone(tmp_path / "memoir")
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    made = subprocess.run(
        ["make", "-o", "install", "store", f"VENV={VENV}"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=_WAIT_S,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert (clone / "memoir.toml").is_file() and (clone / ".memoir" / "memoir.db").is_file()

    entry = json.loads((clone / "mcp.json").read_text("utf-8"))["mcpServers"]["memoir"]
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**env, **entry.get("env", {})},
        cwd=str(clone),
    )
    with anyio.fail_after(_WAIT_S):
        async with Client(params, mode="auto") as client:
            result = await client.call_tool(
                "query_directives", {"task": "add a REST endpoint that stores user emails"}
            )
    assert not result.is_error, result.content[0].text
    out = result.structured_content
    assert out is not None and out["context_block"].strip()
    cited = {Path(c["source_path"]) for c in out["citations"]}
    assert cited and all(p.parts[0] == "sample_rules" for p in cited), cited  # project-relative
    # Nothing was written to a per-user store: the clone's is the only one.
    assert not any(home.rglob("memoir.db"))
