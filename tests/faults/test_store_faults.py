"""Faults under a running server: the store file deleted, replaced, corrupted mid-file, made
read-only, or its disk full. In each case the server stops acknowledging writes it would lose,
says why (tool error, ``/healthz``), keeps answering reads, and loses nothing it acknowledged.

The read-only case runs the server without root's permission bypass (``setpriv``) and takes
the write permission away; the disk-full case puts the store on a small tmpfs this test mounts
(root only; skipped where mounting is not allowed).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_testkit import RunningServer, server_env, start_http_server, stop_http_server
from trust_kit import git_project, http_get, mcp_client

pytestmark = pytest.mark.anyio

_WAIT_S = 60
_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"
_FAST_CHECKS = {"MEMOIR_STORAGE__INTEGRITY_CHECK_INTERVAL_S": "0.05"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` (skips the test where mounting is not allowed)."""
    folder = Path(tempfile.mkdtemp(prefix="memoir-tmpfs-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        folder.rmdir()


def _remount(folder: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True)


def _server(workdir: Path, project: Path, **env: str) -> RunningServer:
    return start_http_server(workdir, "http", workspaces=(project,), env=env)


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _rule(index: int, directives: int = 40) -> str:
    lines = [f"# Rule: Batch {index}", "", "## Directives", ""]
    lines += [
        f"- [MUST] Batch {index} directive {d}: validate payload field f{d} before storing it."
        for d in range(directives)
    ]
    return "\n".join(lines) + "\n"


async def _upsert(url: str, index: int, directives: int = 40) -> Any:
    async with mcp_client(url) as client:
        return await client.call_tool(
            "upsert_markdown",
            {"paths": [f"rules/batch-{index}.md"], "text": _rule(index, directives)},
        )


def _stored_rule_names(db: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return {
            str(r[0])
            for r in conn.execute("SELECT DISTINCT uri FROM resource WHERE uri LIKE '%batch-%'")
        }


def _health(server: RunningServer) -> tuple[int, dict[str, Any]]:
    answer = http_get(f"{server.base}/healthz")
    return answer.status, answer.json()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_store_file_taken_away_stops_acknowledging_writes(tmp_path: Path, how: str) -> None:
    project = git_project(tmp_path / "p")
    server = _server(tmp_path, project)
    db = tmp_path / "memoir.db"
    try:
        with anyio.fail_after(_WAIT_S):
            first = await _upsert(server.mcp_url, 1)
            assert not first.is_error, _text(first)
            if how == "deleted":
                db.unlink()
            else:
                other = tmp_path / "other.db"
                sqlite3.connect(other).close()
                os.replace(other, db)
            second = await _upsert(server.mcp_url, 2)
            async with mcp_client(server.mcp_url) as client:
                read = await client.call_tool("detect_context", {"task": "add a form"})
        status, body = _health(server)
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)
    assert second.is_error
    assert how in _text(second) and "writes are refused" in _text(second)
    assert "Hint:" in _text(second)
    assert status == 503 and body["store"] == "replaced"
    assert not read.is_error and "store replaced" in _text(read)


def _corrupt_middle(db: Path) -> None:
    """Checkpoint the WAL into the file, then overwrite pages in its middle with noise."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    pages = db.stat().st_size // page
    assert pages >= 8, pages
    noise = random.Random(7)
    with db.open("r+b") as handle:
        for number in range(pages // 3, pages // 3 + 4):
            handle.seek(number * page)
            handle.write(bytes(noise.randrange(256) for _ in range(page)))


def _cli_command(workdir: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", _ENTRY, "--db", f"sqlite:///{workdir / 'memoir.db'}", *args]


def _cli(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _cli_command(workdir, *args),
        cwd=workdir,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=_WAIT_S,
    )


async def test_a_store_corrupted_mid_file_refuses_writes_and_says_so(tmp_path: Path) -> None:
    project = git_project(tmp_path / "p")
    server = _server(tmp_path, project, **_FAST_CHECKS)
    try:
        with anyio.fail_after(_WAIT_S):
            for index in range(6):
                loaded = await _upsert(server.mcp_url, index)
                assert not loaded.is_error, _text(loaded)
            _corrupt_middle(tmp_path / "memoir.db")
            await anyio.sleep(0.1)  # past the (test-sized) check interval
            status, body = _health(server)
            write = await _upsert(server.mcp_url, 99)
        search = _cli(tmp_path, "search", "validate payload", "--scope", "x", "--json")
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)
    assert status == 503 and body["store"] == "corrupt"
    assert write.is_error and "integrity" in _text(write) and ".recover" in _text(write)
    assert "Traceback" not in search.stderr
    assert search.returncode != 0 and json.loads(search.stdout)["ok"] is False


# Root ignores file permissions; without these capabilities it obeys them like any user.
_AS_AN_ORDINARY_USER = (
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
)


def _make_read_only(folder: Path, read_only: bool) -> None:
    for path in folder.glob("memoir.db*"):
        path.chmod(0o400 if read_only else 0o600)
    folder.chmod(0o500 if read_only else 0o700)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
async def test_a_store_made_read_only_refuses_writes_then_recovers_without_loss(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    project = git_project(tmp_path / "p")
    server = start_http_server(folder, "http", workspaces=(project,), wrapper=_AS_AN_ORDINARY_USER)
    try:
        with anyio.fail_after(_WAIT_S):
            assert not (await _upsert(server.mcp_url, 1)).is_error
            _make_read_only(folder, True)
            refused = await _upsert(server.mcp_url, 2)
            async with mcp_client(server.mcp_url) as client:
                read = await client.call_tool("detect_context", {"task": "add a form"})
            status, body = _health(server)
            doctor = subprocess.run(
                [*_AS_AN_ORDINARY_USER, *_cli_command(folder, "doctor", "--json")],
                cwd=folder,
                env=server_env(),
                capture_output=True,
                text=True,
                timeout=_WAIT_S,
            )
            _make_read_only(folder, False)
            again = await _upsert(server.mcp_url, 3)
    finally:
        _make_read_only(folder, False)
        assert stop_http_server(server) == 0, "".join(server.stderr)
    assert refused.is_error and "read-only" in _text(refused)
    assert not read.is_error and "store read_only" in _text(read)
    assert status == 503 and body["store"] == "read_only"
    findings = {f["check"]: f["status"] for f in json.loads(doctor.stdout)["findings"]}
    assert findings["integrity"] == "ok" and findings["writable"] == "error"  # not "corrupt"
    assert not again.is_error, _text(again)
    assert _stored_rule_names(folder / "memoir.db") == {"rules/batch-1.md", "rules/batch-3.md"}


async def test_a_full_disk_refuses_the_write_and_keeps_every_acknowledged_one() -> None:
    with tmpfs("3m") as folder:
        project = git_project(folder / "p")
        server = _server(folder, project)
        acknowledged: list[int] = []
        failure = ""
        try:
            with anyio.fail_after(_WAIT_S * 2):
                for index in range(200):
                    result = await _upsert(server.mcp_url, index, directives=60)
                    if result.is_error:
                        failure = _text(result)
                        break
                    acknowledged.append(index)
                _remount(folder, "size=64m")
                after = await _upsert(server.mcp_url, 1000)
        finally:
            assert stop_http_server(server) == 0, "".join(server.stderr)
        stored = _stored_rule_names(folder / "memoir.db")
    assert failure, "the disk never filled up"
    assert "full" in failure and "Traceback" not in failure
    assert acknowledged and not after.is_error, _text(after)
    assert {f"rules/batch-{i}.md" for i in acknowledged} <= stored
