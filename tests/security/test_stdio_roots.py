"""Hostile roots over the real stdio transport: a client cannot make the server read files on
its host, nor pick another project's scope, by what it declares.

The server is ``memoir serve --workspace PROJECT`` (what a client's launch configuration with
``${workspaceFolder}`` runs); the client declares ``file:///``, a sibling project, a symlink that
points out of the project, and paths with ``..``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_testkit import roots_callback, serve_command, server_env
from trust_kit import git_project

pytestmark = pytest.mark.anyio

_WAIT_S = 60
SECRET_RULE = "- Always deploy with the skeleton key kept in ~/.bashrc.\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _stdio(
    tmp_path: Path, *args: str, cwd: Path | None = None, **env: str
) -> StdioServerParameters:
    command = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", *args)
    return StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(**env), cwd=str(cwd or tmp_path)
    )


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def test_declared_roots_never_widen_what_the_server_reads(tmp_path: Path) -> None:
    project = git_project(tmp_path / "project", rules=("api-design.md",))
    neighbour = git_project(tmp_path / "neighbour", rules=("security-secrets.md",))
    (neighbour / "AGENTS.md").write_text(SECRET_RULE)
    (project / "escape.md").symlink_to(neighbour / "AGENTS.md")
    (project / "rules" / "linked").symlink_to(neighbour / "rules", target_is_directory=True)
    hostile_roots = (Path("/"), neighbour, project / ".." / "neighbour")
    with anyio.fail_after(_WAIT_S):
        async with Client(
            _stdio(tmp_path, "--workspace", str(project)),
            mode="legacy",
            list_roots_callback=roots_callback(*hostile_roots),
        ) as client:
            attempts = {
                path: await client.call_tool("upsert_markdown", {"paths": [path]})
                for path in (
                    str(neighbour / "AGENTS.md"),
                    "../neighbour/AGENTS.md",
                    "escape.md",
                    "rules/linked/security-secrets.md",
                    str(Path.home() / ".bashrc"),
                    "/etc/passwd",
                )
            }
            own = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
            answer = await client.call_tool("query_directives", {"task": "deploy with a key"})
            listed = await client.list_resources()
    for path, result in attempts.items():
        assert result.is_error, path
        assert "skeleton key" not in _text(result)
    assert not own.is_error, _text(own)
    # The walk skipped the link that leads out of the project, and said so.
    assert "linked: skipped: a symlink leading outside" in _text(own)
    # The roots were ignored (with a warning), the scope is the configured workspace's.
    assert own.meta["io.memoir/scope"] == f"project:{project}"
    assert "ignored MCP roots" in _text(own)
    assert "skeleton key" not in _text(answer)
    assert not [r for r in listed.resources if "security-secrets" in str(r.uri)]


async def test_a_root_inside_the_workspace_narrows_the_readable_folder(tmp_path: Path) -> None:
    project = git_project(tmp_path / "project", rules=("api-design.md",))
    (project / "docs").mkdir()
    (project / "AGENTS.md").write_text("- Never merge on Fridays.\n")
    with anyio.fail_after(_WAIT_S):
        async with Client(
            _stdio(tmp_path, "--workspace", str(project)),
            mode="legacy",
            list_roots_callback=roots_callback(project / "rules"),
        ) as client:
            inside = await client.call_tool("upsert_markdown", {"paths": ["api-design.md"]})
            beside = await client.call_tool("upsert_markdown", {"paths": ["../AGENTS.md"]})
    assert not inside.is_error, _text(inside)
    assert inside.meta["io.memoir/scope"] == f"project:{project}"  # the project, not rules/
    assert beside.is_error


async def test_a_home_folder_working_directory_is_never_a_project(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".git").mkdir()  # a dotfiles repository does not make it a project
    (home / "AGENTS.md").write_text(SECRET_RULE)
    with anyio.fail_after(_WAIT_S):
        async with Client(
            _stdio(tmp_path, cwd=home, HOME=str(home)),
            mode="legacy",
            list_roots_callback=roots_callback(home),
        ) as client:
            write = await client.call_tool("ingest", {"text": "a fact for no project"})
            read = await client.call_tool("upsert_markdown", {"paths": ["AGENTS.md"]})
    assert write.is_error and "no project scope" in _text(write)
    assert write.meta["io.memoir/scope"] is None
    assert read.is_error


def test_the_cli_run_from_a_home_folder_asks_for_a_scope(tmp_path: Path) -> None:
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    entry = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"
    done = subprocess.run(
        [sys.executable, "-c", entry, "--db", f"sqlite:///{tmp_path / 'm.db'}", "search", "x"],
        cwd=home,
        env={**server_env(), "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=_WAIT_S,
    )
    assert done.returncode == 2
    assert "home folder" in done.stderr and "--scope" in done.stderr
    assert "Traceback" not in done.stderr
    assert os.environ.get("HOME") != str(home)  # the test's own environment is untouched
