"""Streamed ingest: peak RSS and throughput at 5 MB and 50 MB, against one-shot ingest at 5 MB.

Each case runs ``Memoir.hierarchy.ingest_file`` in its own subprocess on a fresh SQLite store
(peak RSS = the child's ``ru_maxrss``), on generated text with four topics
(:mod:`generated_text`). The baseline is today's non-streamed path (the whole text, all its
chunks and all their vectors in memory at once), forced by a batch size above the input's
size, measured in the same run.

The embedder is ``hash:384`` by default: the local model embeds about 20 chunks/s on a shared
two-core machine, so 50 MB (~35,000 chunks) would take half an hour. ``--embedder local``
measures it anyway.

    .venv/bin/python bench/bench_ingest_stream.py [--sizes 5,50] [--embedder hash:384]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generated_text import generate  # noqa: E402

_CHILD = """
import json, resource, sys, time
import anyio
from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.service import Memoir

path, db, batch, embedder = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

async def main():
    settings = load_settings(
        {"hierarchy": {"max_ingest_bytes": 1 << 40, "ingest_batch_bytes": batch}}, environ={}
    )
    memoir = await Memoir.open(f"sqlite:///{db}", settings=settings,
                               embedder=create_embedder(embedder))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = await memoir.hierarchy.ingest_file(path, scope="bench")
    took = time.perf_counter() - started
    tree = await memoir.hierarchy.categories(scope="bench")
    await memoir.close()
    chunks = result.stream.chunks if result.stream else len(result.chunks)
    print(json.dumps({"seconds": took, "chunks": chunks, "categories": tree.total,
                      "rss_before_kb": before,
                      "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))

anyio.run(main)
"""


def run_case(path: Path, batch: int, embedder: str, work: Path) -> dict[str, float]:
    db = work / f"{path.stem}-{batch}.db"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(db), str(batch), embedder],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"case {path.name} failed:\n{done.stderr[-3000:]}")
    out: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    out["mb"] = path.stat().st_size / 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5,50", help="streamed sizes in MB")
    parser.add_argument("--embedder", default="hash:384")
    parser.add_argument("--batch-kib", type=int, default=256)
    parser.add_argument("--baseline-mb", type=int, default=5, help="one-shot baseline size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        files = {}
        base_mb = args.baseline_mb
        for mb in sorted({base_mb, *(int(s) for s in args.sizes.split(","))}):
            files[mb] = work / f"text-{mb}mb.txt"
            files[mb].write_text(generate(mb * 1_000_000), encoding="utf-8")
        rows = [
            ("one-shot (baseline)", base_mb, run_case(files[base_mb], 1 << 40, args.embedder, work))
        ]
        for mb in sorted(int(s) for s in args.sizes.split(",")):
            rows.append(
                ("streamed", mb, run_case(files[mb], args.batch_kib * 1024, args.embedder, work))
            )
    print(f"embedder {args.embedder}, batch {args.batch_kib} KiB, fresh SQLite store per case")
    print(
        f"{'path':<20} {'MB':>5} {'chunks':>7} {'cats':>5} {'s':>8} {'MB/s':>6} "
        f"{'RSS at start MB':>15} {'peak RSS MB':>12}"
    )
    for name, _, r in rows:
        print(
            f"{name:<20} {r['mb']:>5.1f} {r['chunks']:>7.0f} {r['categories']:>5.0f} "
            f"{r['seconds']:>8.1f} {r['mb'] / r['seconds']:>6.2f} "
            f"{r['rss_before_kb'] / 1024:>15.0f} {r['peak_rss_kb'] / 1024:>12.0f}"
        )
    base = rows[0][2]
    for _name, mb, r in rows[1:]:
        print(
            f"ratio streamed {mb} MB / one-shot {rows[0][1]} MB: peak RSS {r['peak_rss_kb'] / base['peak_rss_kb']:.2f}x, "
            f"throughput {(r['mb'] / r['seconds']) / (base['mb'] / base['seconds']):.2f}x"
        )


if __name__ == "__main__":
    main()
