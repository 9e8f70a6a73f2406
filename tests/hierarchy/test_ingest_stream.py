"""Streamed ingest: batches, one transaction each, resumable after a kill; progress; removal.

The kill test runs the real CLI in a subprocess, kills it (SIGKILL) once a few batches are
stored, runs it again, and compares the store with an uninterrupted ingest of the same file.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_core.embed import create_embedder
from memory_core.errors import InvalidInputError
from memory_core.hierarchy.batches import IngestProgress, read_batches
from memory_core.hierarchy.port_tree import _all_chunks
from memory_core.scope import Scope
from memory_core.service import Memoir

from .conftest import make_settings, open_memoir

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
_WORDS = {
    "db": [
        "index",
        "query",
        "postgres",
        "table",
        "transaction",
        "vacuum",
        "btree",
        "planner",
        "replica",
        "schema",
    ],
    "cook": [
        "oven",
        "flour",
        "butter",
        "simmer",
        "garlic",
        "onion",
        "roast",
        "sauce",
        "knead",
        "dough",
    ],
    "astro": [
        "galaxy",
        "orbit",
        "telescope",
        "nebula",
        "comet",
        "planet",
        "redshift",
        "star",
        "quasar",
        "eclipse",
    ],
}


def topic_text(n_bytes: int, seed: int = 3) -> str:
    rnd = random.Random(seed)
    paragraphs: list[str] = []
    size = 0
    while size < n_bytes:
        words = _WORDS[list(_WORDS)[len(paragraphs) // 3 % 3]]
        para = " ".join(
            " ".join(rnd.choice(words) for _ in range(rnd.randint(8, 14))).capitalize()
            + f" item {len(paragraphs)}."
            for _ in range(rnd.randint(4, 8))
        )
        paragraphs.append(para)
        size += len(para) + 2
    return "\n\n".join(paragraphs)


def _env(tmp: Path, batch_bytes: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env.update(
        PYTHONPATH=str(ROOT),
        HOME=str(tmp),
        XDG_DATA_HOME=str(tmp / "xdg"),
        MEMOIR_EMBEDDING__MODEL="hash:384",
        MEMOIR_HIERARCHY__INGEST_BATCH_BYTES=str(batch_bytes),
        MEMOIR_HIERARCHY__MAX_INGEST_BYTES=str(50 * 1024 * 1024),
    )
    return env


def _cli(tmp: Path, db: Path, *args: str, batch_bytes: int) -> list[str]:
    return [sys.executable, "-m", "server.cli", "--db", f"sqlite:///{db}", *args]


def _run(tmp: Path, db: Path, *args: str, batch_bytes: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _cli(tmp, db, *args, batch_bytes=batch_bytes),
        cwd=tmp,
        env=_env(tmp, batch_bytes),
        capture_output=True,
        text=True,
        timeout=300,
    )


async def _chunks(db: Path, tmp: Path) -> list[tuple[str, str, Any]]:
    memoir = await Memoir.open(
        f"sqlite:///{db}", settings=make_settings(tmp), embedder=create_embedder("hash:384")
    )
    try:
        items = await memoir.store.read(lambda tx: _all_chunks(tx, Scope.of("s")))
        return sorted((i.uid, i.text, i.metadata.get("start_offset")) for i in items)
    finally:
        await memoir.close()


async def _stored_and_recorded(db: Path, tmp: Path) -> tuple[int, dict[str, Any]]:
    memoir = await Memoir.open(
        f"sqlite:///{db}", settings=make_settings(tmp), embedder=create_embedder("hash:384")
    )
    try:
        key = Scope.of("s")
        items = await memoir.store.read(lambda tx: _all_chunks(tx, key))
        (record,) = await memoir.store.read(lambda tx: tx.resources.find(key, kinds=["text"]))
        return len(items), dict(record.metadata)
    finally:
        await memoir.close()


async def test_a_killed_cli_ingest_resumes_and_equals_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    source = tmp_path / "big.txt"
    source.write_text(topic_text(1_200_000), encoding="utf-8")
    batch = 16 * 1024
    killed_db, clean_db = tmp_path / "killed.db", tmp_path / "clean.db"
    process = subprocess.Popen(
        _cli(
            tmp_path, killed_db, "ingest", str(source), "--scope", "s", "--json", batch_bytes=batch
        ),
        cwd=tmp_path,
        env=_env(tmp_path, batch),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    seen: list[dict[str, Any]] = []
    try:
        for line in process.stderr:
            if line.startswith('{"event": "progress"'):
                seen.append(json.loads(line))
                if seen[-1]["batches_done"] >= 3:
                    process.send_signal(signal.SIGKILL)
                    break
    finally:
        process.kill()
        process.wait(timeout=60)
    assert seen and seen[-1]["batches_done"] >= 3, "no progress lines before the kill"
    assert seen[-1]["bytes_done"] < seen[-1]["bytes_total"]
    # Whole batches only: the chunks stored are exactly those the recorded progress counts.
    stored, recorded = await _stored_and_recorded(killed_db, tmp_path)
    assert stored == recorded["chunks_done"] >= seen[-1]["chunks_done"]
    assert recorded["complete"] is False

    resumed = _run(
        tmp_path, killed_db, "ingest", str(source), "--scope", "s", "--json", batch_bytes=batch
    )
    assert resumed.returncode == 0, resumed.stderr
    stream = json.loads(resumed.stdout)["ingest"]["stream"]
    assert stream["batches_skipped"] >= 3
    assert stream["batches"] > stream["batches_skipped"]

    clean = _run(
        tmp_path, clean_db, "ingest", str(source), "--scope", "s", "--json", batch_bytes=batch
    )
    assert clean.returncode == 0, clean.stderr
    whole = json.loads(clean.stdout)["ingest"]["stream"]
    assert whole["batches_skipped"] == 0 and whole["batches"] == stream["batches"]
    assert whole["chunks"] == stream["chunks"]

    after_kill, uninterrupted = (
        await _chunks(killed_db, tmp_path),
        await _chunks(clean_db, tmp_path),
    )
    assert after_kill == uninterrupted
    assert len({uid for uid, _, _ in after_kill}) == len(after_kill)  # no duplicates


def test_batches_cut_at_paragraphs_and_resume_at_a_recorded_offset() -> None:
    text = topic_text(100_000) + "\n\nUnicode tail: café naïve 数据库 " * 50
    raw = text.encode("utf-8")
    batches = list(read_batches(io.BytesIO(raw), batch_bytes=4096, origin="t"))
    assert "".join(b.text for b in batches) == text
    assert all(b.text.endswith("\n\n") for b in batches[:-3])  # paragraph ends where possible
    assert all(b.byte_end - b.byte_start <= 4096 for b in batches)
    middle = batches[7]
    rest = list(
        read_batches(
            io.BytesIO(raw),
            batch_bytes=4096,
            origin="t",
            start=middle.byte_start,
            char_start=middle.char_start,
            first_index=middle.index,
        )
    )
    assert rest == batches[7:]


def test_invalid_utf8_names_the_input_and_the_byte_offset() -> None:
    with pytest.raises(InvalidInputError) as caught:
        list(read_batches(io.BytesIO(b"a" * 5000 + b"\xff\xfe"), batch_bytes=4096, origin="x.txt"))
    assert "x.txt" in caught.value.message and "5,000" in caught.value.message


async def test_a_streamed_ingest_reports_progress_per_batch_and_is_idempotent(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path, ingest_batch_bytes=8192)
    memoir = await open_memoir(tmp_path, settings)
    seen: list[IngestProgress] = []

    async def record(progress: IngestProgress) -> None:
        seen.append(progress)

    try:
        text = topic_text(60_000)
        first = await memoir.hierarchy.ingest_text(text, scope="s", source="notes", progress=record)
        assert first.stream is not None and first.stream.batches == len(seen) >= 7
        assert [p.batches_done for p in seen] == list(range(1, len(seen) + 1))
        assert seen[-1].bytes_done == seen[-1].bytes_total == len(text.encode())
        assert first.stream.new_chunks == first.stream.chunks
        tree = await memoir.hierarchy.categories(scope="s")
        assert sum(_counts(tree.model_dump()["nodes"])) == first.stream.new_chunks
        again = await memoir.hierarchy.ingest_text(text, scope="s", source="notes")
        assert again.stream is not None and again.stream.new_chunks == 0
        assert again.stream.batches_skipped == first.stream.batches
    finally:
        await memoir.close()


def _counts(nodes: list[dict[str, Any]]) -> list[int]:
    out: list[int] = []
    for node in nodes:
        out.extend([node["chunk_count"]] if node["chunk_count"] else [])
        out.extend(_counts(node["children"]))
    return out


async def test_the_size_limit_is_a_setting_named_in_the_error(tmp_path: Path) -> None:
    memoir = await open_memoir(tmp_path, make_settings(tmp_path, max_ingest_bytes=10_000))
    try:
        with pytest.raises(InvalidInputError) as caught:
            await memoir.hierarchy.ingest_text(topic_text(20_000), scope="s")
        assert "hierarchy.max_ingest_bytes" in caught.value.message
        assert "MEMOIR_HIERARCHY__MAX_INGEST_BYTES" in (caught.value.hint or "")
    finally:
        await memoir.close()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_the_cli_draws_a_bar_on_a_terminal_and_stays_quiet_on_a_pipe() -> None:
    from server.cli.progress import progress_reporter

    assert progress_reporter(as_json=False, stream=io.StringIO()) is None  # piped: no noise
    terminal = _Terminal()
    bar = progress_reporter(as_json=False, stream=terminal)
    assert bar is not None
    await bar(IngestProgress(500_000, 1_000_000, 2, 300, 300))
    await bar(IngestProgress(1_000_000, 1_000_000, 4, 610, 600))
    bar.close()
    drawn = terminal.getvalue()
    assert drawn.count("\r") == 2 and drawn.endswith("\n")
    assert " 50% 0.5/1.0 MB" in drawn and "100% 1.0/1.0 MB, 610 chunks (600 new)" in drawn
    lines = io.StringIO()
    as_json = progress_reporter(as_json=True, stream=lines)
    assert as_json is not None
    await as_json(IngestProgress(10, 20, 1, 3, 3))
    assert json.loads(lines.getvalue()) == {
        "event": "progress", "bytes_done": 10, "bytes_total": 20, "batches_done": 1,
        "chunks_done": 3, "new_chunks": 3, "batches_skipped": 0,
    }  # fmt: skip
