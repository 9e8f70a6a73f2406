"""The near-duplicate lookup goes through the band index: its cost does not grow with the scope.

The write path of agent memories asks ``near_simhash`` on every ``remember``; the issue asks that
the lookup "does not scan every row". SQLite counts the virtual-machine instructions a statement
runs (a progress handler called every instruction), so the test compares the work of one lookup
in a scope of 200 rows with the work in a scope of 4,000 rows of unrelated SimHashes: a scan grows
twentyfold, the band index stays flat.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from memory_core.models import NewItem
from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.sqlite.store import SqliteStore
from memory_core.storage.sqlite.tx import SqliteTx

pytestmark = pytest.mark.anyio

PROBE = 0xF0F0_1234_5678_9ABC


def _far_from_probe(rng: random.Random) -> int:
    # Random 64-bit values share no 16-bit band with the probe (checked, so the count is exact).
    while True:
        value = rng.getrandbits(64)
        if all(((value ^ PROBE) >> shift) & 0xFFFF for shift in (0, 16, 32, 48)):
            return value


async def _lookup_cost(path: Path, rows: int) -> tuple[int, int]:
    store = await open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteStore)
    scope = Scope.of("memories")
    rng = random.Random(rows)

    def memory(uid: str, simhash: int) -> NewItem:
        return NewItem(uid=uid, kind="chunk", text=uid, token_count=1, scope=scope, simhash=simhash)

    items = [memory(f"m{i}", _far_from_probe(rng)) for i in range(rows)]
    items.append(memory("near", PROBE ^ 0b101))
    await store.write(lambda tx: tx.items.add(items))

    def count(conn: Any) -> tuple[int, int]:
        steps = [0]

        def tick() -> int:
            steps[0] += 1
            return 0

        conn.set_progress_handler(tick, 1)
        try:
            found = SqliteTx(conn).items.near_simhash(scope, PROBE)
        finally:
            conn.set_progress_handler(None, 1)
        return steps[0], len(found)

    try:
        return await store.db.read(count)
    finally:
        await store.close()


async def test_near_duplicate_lookup_cost_does_not_grow_with_the_scope(tmp_path: Path) -> None:
    small, found_small = await _lookup_cost(tmp_path / "small.db", 200)
    large, found_large = await _lookup_cost(tmp_path / "large.db", 4_000)
    assert found_small == found_large == 1  # the one near-duplicate, in both
    # 20x the rows: a scan would cost ~20x the instructions; the band index a B-tree step more.
    assert large < small * 2, f"lookup ran {small} then {large} instructions: it scans the scope"
