"""What verifiable deletion and the store's health checks cost.

Same run, same items, two stores: ``storage.secure_delete`` on (zeroed pages, FTS5
secure-delete, WAL emptied after every deleting transaction) against off (the baseline).

1. Writing items with their FTS and vector rows (batches of ``BATCH``): throughput on / off.
2. Deleting them again in batches (each batch one transaction, as ``rm`` does): on / off.
3. The quick integrity check on the filled store (``PRAGMA quick_check``), in ms and ms/MB,
   which runs on open and every ``storage.integrity_check_interval_s`` before a write.

Usage: python bench/bench_secure_delete.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.models import NewItem, content_hash, stable_id  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402
from server.logging_setup import configure_logging  # noqa: E402

DIM = 384
BATCH = 200


def corpus(n: int) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(14)
    words = np.array(
        [
            "retry",
            "cache",
            "deploy",
            "schema",
            "token",
            "index",
            "query",
            "budget",
            "user",
            "request",
        ]
    )
    texts = [" ".join(rng.choice(words, size=80)) + f" item{i}" for i in range(n)]
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return texts, vectors


async def run(path: Path, secure: bool, texts: list[str], vectors: np.ndarray) -> dict[str, float]:
    settings = load_settings({"storage": {"secure_delete": secure}}, environ={})
    memoir = await Memoir.open(
        f"sqlite:///{path}", settings=settings, embedder=create_embedder("hash:384")
    )
    scope = Scope.of("bench")
    items = [
        NewItem(
            uid=stable_id("sd", i),
            kind="chunk",
            text=t,
            token_count=80,
            scope=scope,
            content_hash=content_hash(t),
        )
        for i, t in enumerate(texts)
    ]
    ids: list[int] = []
    started = time.perf_counter()
    for start in range(0, len(items), BATCH):
        batch, vecs = items[start : start + BATCH], vectors[start : start + BATCH]
        ids += await memoir.store.write(lambda tx, b=batch, v=vecs: tx.items.add(b, v))
    write_s = time.perf_counter() - started
    db = memoir.store.db  # type: ignore[attr-defined]
    started = time.perf_counter()
    await db.check_integrity(budget_s=60.0)
    check_s = time.perf_counter() - started
    size_mb = path.stat().st_size / 1e6
    started = time.perf_counter()
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        await memoir.store.write(lambda tx, c=chunk: tx.items.delete(c))
    delete_s = time.perf_counter() - started
    await memoir.close()
    return {"write_s": write_s, "delete_s": delete_s, "check_s": check_s, "size_mb": size_mb}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    configure_logging("warning")
    n = 2_000 if args.quick else 10_000
    rounds = 1 if args.quick else 3
    texts, vectors = corpus(n)
    print(f"== secure delete: {n} items ({DIM}-d vectors, FTS rows), {BATCH} per transaction")
    best: dict[bool, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for secure in (False, True):
                got = anyio.run(run, Path(tmp) / f"{secure}-{r}.db", secure, texts, vectors)
                prev = best.get(secure)
                best[secure] = got if prev is None else {k: min(v, prev[k]) for k, v in got.items()}
    off, on = best[False], best[True]
    print(f"write   off {n / off['write_s']:8.0f} items/s   on {n / on['write_s']:8.0f} items/s")
    print(f"delete  off {n / off['delete_s']:8.0f} items/s   on {n / on['delete_s']:8.0f} items/s")
    print(f"ratio on/off write throughput:  {off['write_s'] / on['write_s']:.2f}x")
    print(f"ratio on/off delete throughput: {off['delete_s'] / on['delete_s']:.2f}x")
    print(
        f"quick_check on {on['size_mb']:.1f} MB: {on['check_s'] * 1000:.0f} ms "
        f"({on['check_s'] * 1000 / max(on['size_mb'], 0.01):.1f} ms/MB; open budget 500 ms, "
        "periodic budget 1000 ms)"
    )


if __name__ == "__main__":
    main()
