"""The rough edges of a newcomer's first hour (issue 13, item 6), each pinned by a test.

Subprocesses are the real CLI and a real embedding application; the README's own snippet and
configuration table are read from the README itself.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from memory_core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"


def run_memoir(*args: str, cwd: Path, stdin: str | None = None, **env: str) -> Any:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    # A home of its own beside the folder (a home folder is never a project, issue 14).
    home = cwd.parent / f"{cwd.name}-home"
    home.mkdir(exist_ok=True)
    environment.update({"PYTHONPATH": str(ROOT), "HOME": str(home), **env})
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        cwd=cwd,
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- the server's port ------------------------------------------------------------------------


def test_a_port_in_use_is_a_two_line_error_with_the_fix(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_memoir(
            "--db",
            f"sqlite:///{tmp_path / 'm.db'}",
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--print-config",
            cwd=tmp_path,
        )
    assert result.returncode != 0 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"error: port {port} on 127.0.0.1 is already in use (another memoir or another server)",
        lines[1],
    ]
    assert lines[1].startswith("hint: ") and f"PORT={port + 1} make run" in lines[1]
    assert "PORT=" in README  # the README tells how to pick another port


# -- an embedding application ------------------------------------------------------------------

APP = """
import asyncio, logging, sys
if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.DEBUG)
from memory_core.service import Memoir

async def main():
    async with await Memoir.open(sys.argv[2]) as memoir:
        await memoir.ingest_text("Releases ship on Tuesdays after the freeze.", scope="global")
        await memoir.query("When do releases ship?", scope="global")
        await memoir.query("Anything about holidays?", scope="empty")

asyncio.run(main())
"""


@pytest.mark.parametrize("logging_setup", ["unconfigured", "configured"])
def test_the_library_never_writes_to_stdout(tmp_path: Path, logging_setup: str) -> None:
    script = tmp_path / "app.py"
    script.write_text(APP, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env.update({"PYTHONPATH": str(ROOT), "MEMOIR_EMBEDDING__MODEL": "hash:384"})
    result = subprocess.run(
        [sys.executable, str(script), logging_setup, f"sqlite:///{tmp_path / 'app.db'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # stdout is the embedding MCP server's wire
    if logging_setup == "configured":  # the application's handlers get memoir's records
        assert "memory_core" in result.stderr and "hierarchy query" in result.stderr
    else:
        assert result.stderr == ""


# -- the README --------------------------------------------------------------------------------


def test_the_readme_python_snippet_runs_on_a_fresh_store(tmp_path: Path) -> None:
    section = README.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    [snippet] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    (tmp_path / "snippet.py").write_text(snippet, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    result = subprocess.run(
        [sys.executable, "snippet.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "cursor pagination" in result.stdout and "advisory locks" in result.stdout
    assert "['adr-7']" in result.stdout  # the answer cites where its passage came from
    assert (tmp_path / "memoir.db").is_file()


def _readme_defaults() -> dict[str, str]:
    """``section.key`` -> the default the README's configuration table states."""
    found: dict[str, str] = {}
    for line in README.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([\w.]+)`", cells[0])
        defaults = [d.strip().strip("`") for d in cells[2].split(",")]
        if len(names) != len(defaults) or "." not in names[0]:
            continue
        section = names[0].split(".")[0]
        for name, default in zip(names, defaults, strict=True):
            found[name if "." in name else f"{section}.{name}"] = default
    return found


def test_the_readme_configuration_defaults_are_the_codes() -> None:
    stated = _readme_defaults()
    assert {"search.fusion", "rules.max_items", "hierarchy.max_ingest_bytes"} <= set(stated)
    actual = Settings().model_dump()
    for name, default in stated.items():
        section, key = name.split(".")
        value = actual[section][key]
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        shown = "—" if value is None else shown
        assert default == shown, f"README says {name} = {default}, the code has {value!r}"


def test_memoir_init_writes_the_same_defaults_it_documents(tmp_path: Path) -> None:
    from server.cli.main import _TOML_TEMPLATE

    commented = re.sub(r"^# ?(\w+ = )", r"\1", _TOML_TEMPLATE, flags=re.M)
    written = tomllib.loads(commented.format(db_name="memoir.db"))
    actual = Settings().model_dump()
    for section, values in written.items():
        if isinstance(values, dict):
            for key, value in values.items():
                if actual[section][key] is not None:  # not an example of an unset option
                    assert actual[section][key] == value, f"{section}.{key}"


# -- the CLI -----------------------------------------------------------------------------------


def test_rql_tables_keep_the_selected_columns_rm_takes(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "deploy.md").write_text("# Deploy\n\nBlue-green on Fridays.\n")
    env = {"MEMOIR_EMBEDDING__MODEL": "hash:384"}
    assert run_memoir("init", ".", cwd=tmp_path, **env).returncode == 0
    assert run_memoir("add", "docs", cwd=tmp_path, **env).returncode == 0
    table = run_memoir("query", "--rql", "SELECT doc.id, doc.path FROM doc", cwd=tmp_path, **env)
    header, _rule, row = table.stdout.splitlines()[:3]
    assert header.split() == ["#", "doc.id", "doc.path"]
    doc_id = row.split()[1]
    removed = run_memoir("rm", doc_id, "--json", cwd=tmp_path, **env)
    assert json.loads(removed.stdout)["removed"][0]["doc_id"] == doc_id


def test_ask_with_a_budget_too_small_names_the_dropped_path_and_the_budget_needed(
    tmp_path: Path,
) -> None:
    env = {"MEMOIR_EMBEDDING__MODEL": "hash:384"}
    run_memoir("ingest", "--text", "Backups run nightly.", "--scope", "s", cwd=tmp_path, **env)
    asked = run_memoir(
        "ask", "backups?", "--budget", "1", "--scope", "s", "--json", cwd=tmp_path, **env
    )
    body = json.loads(asked.stdout)["query"]
    assert asked.returncode == 3 and body["error"]["code"] == "no_chunks"
    assert body["dropped_paths"] and body["dropped_paths"] == body["explored_paths"]
    assert "budget of 1 tokens" in body["error"]["message"]
    assert "at least" in body["error"]["hint"]


def test_errors_never_carry_a_null_hint_or_say_the_hint_twice(tmp_path: Path) -> None:
    env = {"MEMOIR_EMBEDDING__MODEL": "hash:384"}
    for args in (
        ("ask", "anything?", "--scope", "nothing", "--json"),
        ("ingest", "--text", "x", "--category", "a / b / c / d", "--json"),
        ("query", "--rql", "SELEC nothing", "--json"),
    ):
        result = run_memoir(*args, cwd=tmp_path, **env)
        assert result.returncode != 0
        body = json.loads(result.stdout)
        error = body.get("error") or next(v["error"] for v in body.values() if isinstance(v, dict))
        assert error.get("hint"), args  # present and non-empty: never "hint": null
        assert "hint:" not in error["message"].lower()
        assert error["hint"] not in error["message"]


# -- size limits -------------------------------------------------------------------------------


def test_an_ingest_over_the_size_limit_names_the_size_the_limit_and_the_setting(
    tmp_path: Path,
) -> None:
    env = {"MEMOIR_EMBEDDING__MODEL": "hash:384", "MEMOIR_HIERARCHY__MAX_INGEST_BYTES": "1000"}
    big = "Lots of words about storage engines. " * 100  # 3,700 bytes
    (tmp_path / "big.md").write_text(big, encoding="utf-8")
    for args, stdin in ((("ingest", "big.md"), None), (("ingest", "-"), big)):
        result = run_memoir(*args, cwd=tmp_path, stdin=stdin, **env)
        assert result.returncode == 2
        assert "3,700 bytes" in result.stderr and "1,000 bytes" in result.stderr
        assert "hierarchy.max_ingest_bytes" in result.stderr
    added = run_memoir(
        "add", "big.md", cwd=tmp_path, MEMOIR_DOCUMENTS__MAX_FILE_BYTES="1000", **env
    )
    assert added.returncode == 2
    assert "3700 bytes" in added.stderr and "documents.max_file_bytes (1000)" in added.stderr
    stats = run_memoir("stats", "--json", cwd=tmp_path, **env)
    assert json.loads(stats.stdout)["store"]["items_by_kind"] == {}  # nothing half-stored
