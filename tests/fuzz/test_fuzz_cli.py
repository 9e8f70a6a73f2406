"""Generated arguments for the CLI commands, each run as a real ``memoir`` subprocess.

Every run: no traceback, an exit code from the documented set (0 ok, 1 failure, 2 bad input or
usage, 3 not found, 4 store unavailable, 5 locked, 6 corrupt), ``--json`` output that parses,
an error that carries a hint; and afterwards the document stored before is still found.
Bounded: a fixed number of derandomized examples (each is a process start).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_testkit import server_env

_WAIT_S = 60
_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"
_EXIT_CODES = {0, 1, 2, 3, 4, 5, 6}
SEEDED = "The payroll export runs every Friday at noon."

_WORDS = st.one_of(
    st.sampled_from(
        [
            "",
            "../../etc/passwd",
            "b" * 300,
            "NOT " * 100 + "doc.path = 'x'",
            "doc.path = ",
            "SELECT * FROM chunk FILTER (((",
            "SELECT doc.path FROM doc LIMIT 999999999",
            "'; DROP TABLE item; --",
            "\x1b[31m",
            "日本語 ✓",
            "-1",
            "--json",
        ]
    ),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60),
)

# (command words, how many free arguments it takes, options it may get)
_COMMANDS: list[tuple[tuple[str, ...], int, tuple[str, ...]]] = [
    (("search",), 1, ("--filter", "--k", "--mode")),
    (("query", "--rql"), 1, ()),
    (("context",), 1, ("--budget",)),
    (("rm",), 1, ()),
    (("rules", "query"), 1, ("--budget",)),
    (("rules", "detect"), 1, ()),
    (("rules", "show"), 1, ()),
    (("ask",), 1, ("--strategy",)),
    (("add", "--text"), 1, ("--path",)),
    (("ingest", "--text"), 1, ()),
]


@st.composite
def _invocations(draw: st.DrawFn) -> list[str]:
    words, free, options = draw(st.sampled_from(_COMMANDS))
    args = [*words, *(draw(_WORDS) for _ in range(free))]
    for option in (
        draw(st.lists(st.sampled_from(options), max_size=2, unique=True)) if options else []
    ):
        args += [option, draw(_WORDS)]
    return [*args, "--json"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("fuzz-cli")
    (root / ".git").mkdir()
    (root / "seed.md").write_text(SEEDED)
    assert _memoir(root, "add", "seed.md").returncode == 0
    yield root


def _memoir(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _ENTRY, "--db", f"sqlite:///{root / 'memoir.db'}", *args],
        cwd=root,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=_WAIT_S,
        stdin=subprocess.DEVNULL,
    )


def test_generated_command_lines_end_cleanly(workdir: Path) -> None:
    @settings(
        max_examples=12,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(args=_invocations())
    def run(args: list[str]) -> None:
        done = _memoir(workdir, *args)
        assert "Traceback" not in done.stderr, (args, done.stderr[-3000:])
        assert done.returncode in _EXIT_CODES, (args, done.returncode, done.stderr[-2000:])
        if done.returncode == 2 and not done.stdout.strip():
            assert "Usage:" in done.stderr or "hint:" in done.stderr, (args, done.stderr)
            return
        body = json.loads(done.stdout)
        if body.get("ok") is False:
            error = body["error"]
            assert error["message"] and error["hint"], (args, error)
        else:
            assert done.returncode == 0, (args, done.returncode)

    run()


def test_the_seeded_document_survives_the_fuzzing(workdir: Path) -> None:
    done = _memoir(workdir, "search", "payroll export", "--json")
    assert done.returncode == 0, done.stderr
    assert "Friday" in done.stdout
