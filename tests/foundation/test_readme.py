"""The README stays honest: its config snippet, tools and commands are the real ones."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from server.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_the_readme_stdio_snippet_is_mcp_json() -> None:
    snippets = [json.loads(block) for block in _code_blocks("json")]
    assert json.loads((ROOT / "mcp.json").read_text()) in snippets


def test_the_readme_claude_code_command_is_the_one_the_server_prints() -> None:
    from server.mcp_app.client_config import claude_code_command

    assert claude_code_command() in README


def test_every_default_mcp_tool_is_in_the_readme() -> None:
    from server.mcp_app.tools import DEFAULT_TOOLS

    for tool in DEFAULT_TOOLS:
        assert f"`{tool}`" in README, tool


def test_every_command_the_readme_shows_exists() -> None:
    shown: set[str] = set()
    for block in _code_blocks("sh"):
        for line in block.splitlines():
            if line.startswith("memoir "):
                words = [w for w in line.split() if not w.startswith("-")]
                # "memoir stats | doctor | compact …" lists several commands on one line
                shown.update(
                    w for w in words[1:] if re.fullmatch(r"[a-z]+", w) and w in cli.commands
                )
                shown.add(words[1])
    assert shown, "no memoir commands found in the README"
    for name in shown:
        assert name in cli.commands, f"README shows `memoir {name}`, which does not exist"


def test_every_top_level_command_is_in_the_readme() -> None:
    for name, command in cli.commands.items():
        assert isinstance(command, click.Command)
        assert re.search(rf"memoir (.*\b)?{name}\b", README), (
            f"`memoir {name}` is not in the README"
        )


def test_every_make_target_the_readme_names_exists() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in set(re.findall(r"`make (\w[\w-]*)`", README)) | {"run", "test", "check", "bench"}:
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
