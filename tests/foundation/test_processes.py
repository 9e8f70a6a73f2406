"""Several processes on one file: nothing lost, no "database is locked", no half-written item."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_core.storage.sqlite.driver import load_vec_extension, select_driver

WRITER = textwrap.dedent(
    """
    import sys, anyio
    from memory_core.config import load_settings
    from memory_core.embed import create_embedder
    from memory_core.models import NewItem, stable_id
    from memory_core.scope import Scope
    from memory_core.service import Memoir
    from server.logging_setup import configure_logging

    configure_logging("warning")  # an entry point configures logging: stderr only
    url, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])

    async def main():
        memoir = await Memoir.open(url, settings=load_settings(environ={}),
                                   embedder=create_embedder("hash:32"))
        async def write(i):
            text = f"worker {worker} item {i}"
            item = NewItem(uid=stable_id(worker, i), kind="chunk", text=text, token_count=4,
                           scope=Scope.of("s"))
            vectors = await memoir.embedder.embed_documents([text])
            await memoir.store.write(lambda tx: tx.items.add([item], vectors))
        async with anyio.create_task_group() as tg:   # the writes of one process run concurrently
            for i in range(count):
                tg.start_soon(write, i)
        await memoir.close()

    anyio.run(main)
    """
)

BATCH_WRITER = textwrap.dedent(
    """
    import sys, anyio
    from memory_core.config import load_settings
    from memory_core.embed import create_embedder
    from memory_core.models import NewItem, stable_id
    from memory_core.scope import Scope
    from memory_core.service import Memoir
    from server.logging_setup import configure_logging

    configure_logging("warning")  # an entry point configures logging: stderr only
    url = sys.argv[1]

    async def main():
        memoir = await Memoir.open(url, settings=load_settings(environ={}),
                                   embedder=create_embedder("hash:32"))
        batch = 0
        while True:   # killed from outside, somewhere in the middle of a write
            texts = [f"batch {batch} item {i} " + "x" * 200 for i in range(100)]
            items = [NewItem(uid=stable_id(batch, i), kind="chunk", text=t, token_count=50,
                             scope=Scope.of("s"), metadata={"batch": batch})
                     for i, t in enumerate(texts)]
            vectors = await memoir.embedder.embed_documents(texts)
            await memoir.store.write(lambda tx: tx.items.add(items, vectors))
            print(f"committed {batch}", flush=True)
            batch += 1

    anyio.run(main)
    """
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def _raw(path: Path):
    conn = select_driver().connect(str(path))
    load_vec_extension(conn)
    return conn


@pytest.mark.slow
def test_four_processes_writing_concurrently_lose_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    # Create the store first so the workers race on writes, not on the first migration.
    subprocess.run(
        [sys.executable, str(script), url, "init", "0"], check=True, env=_env(), timeout=60
    )
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), url, f"w{n}", "50"],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    outputs = [w.communicate(timeout=120) for w in workers]
    for worker, (_, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
        assert "database is locked" not in err
    conn = _raw(tmp_path / "shared.db")
    assert conn.execute("SELECT count(*) FROM item").fetchone()[0] == 200
    assert conn.execute("SELECT count(*) FROM item_fts").fetchone()[0] == 200
    assert conn.execute("SELECT count(*) FROM item_vec").fetchone()[0] == 200


@pytest.mark.slow
def test_sigkill_in_the_middle_of_writes_leaves_a_consistent_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    script = tmp_path / "batch_writer.py"
    script.write_text(BATCH_WRITER)
    child = subprocess.Popen(
        [sys.executable, str(script), url], env=_env(), stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    try:
        for _ in range(3):  # wait (bounded by the child's own progress) until batches landed
            line = child.stdout.readline()
            assert line.startswith("committed"), line
    finally:  # the writer never stops on its own: kill it even when the wait failed
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)

    conn = _raw(tmp_path / "killed.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    items = conn.execute("SELECT count(*) FROM item").fetchone()[0]
    assert items >= 300 and items % 100 == 0  # whole batches only: no half-written transaction
    assert conn.execute("SELECT count(*) FROM item_fts").fetchone()[0] == items
    assert conn.execute("SELECT count(*) FROM item_vec").fetchone()[0] == items
    per_batch = conn.execute(
        "SELECT json_extract(metadata, '$.batch'), count(*) FROM item GROUP BY 1"
    ).fetchall()
    assert all(n == 100 for _, n in per_batch)
