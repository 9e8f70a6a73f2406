"""Parser throughput: rules_parser.parse against markdown-it-py's bare parse of the same text.

Replicates every file in sample_rules/ (templates and tool formats) N times and times, in the
same run, (a) ``MarkdownIt("commonmark").parse`` alone, the floor for any token-based parser,
and (b) ``rules_parser.parse`` (tokens + structure + validation + inference + secret scan).

    .venv/bin/python bench/bench_parser.py [--quick]

Prints directives/s and MB/s for each, and the ratio parse / baseline (time per byte).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rules_parser import discover_rule_files, parse  # noqa: E402


def _corpus(copies: int) -> list[tuple[str, str]]:
    root = REPO / "sample_rules"
    files = [
        (p.relative_to(root.resolve()).as_posix(), p.read_text(encoding="utf-8"))
        for p in discover_rule_files(root)
    ]
    return [(f"copy{i}/{path}", text) for i in range(copies) for path, text in files]


def _time(fn: object, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpus, fewer repeats")
    args = parser.parse_args()
    copies, repeats = (5, 3) if args.quick else (40, 5)

    corpus = _corpus(copies)
    total_bytes = sum(len(text.encode()) for _, text in corpus)
    directives = sum(len(parse(text, path).document.directives) for path, text in corpus)  # type: ignore[union-attr]
    md = MarkdownIt("commonmark").enable("table")

    def baseline() -> None:
        for _, text in corpus:
            md.parse(text)

    def full() -> None:
        for path, text in corpus:
            parse(text, path)

    baseline()  # warm caches (compiled regexes, markdown-it rules)
    full()
    t_base = _time(baseline, repeats)
    t_full = _time(full, repeats)
    mb = total_bytes / 1e6
    print(f"corpus: {len(corpus)} documents, {mb:.2f} MB, {directives} directives")
    print(f"markdown-it parse : {t_base * 1e3:8.1f} ms  {mb / t_base:7.2f} MB/s")
    print(
        f"rules_parser.parse: {t_full * 1e3:8.1f} ms  {mb / t_full:7.2f} MB/s  "
        f"{directives / t_full:9.0f} directives/s  {len(corpus) / t_full:7.0f} docs/s"
    )
    print(f"ratio parse / markdown-it (time): {t_full / t_base:.2f}x")
    print("seed-003 target: >= 50 directives/s for ingestion (parse is one part of it)")


if __name__ == "__main__":
    main()
