"""Parsing loss per cause: which labelled lines never become (part of) a parsed directive.

For every label of the dev set, the file is parsed as ``memoir rules upsert <file>`` parses it
(``rules_parser.load`` with the path inside the set) and the label is *covered* when some
directive's ``line_start..line_end`` holds the labelled line (the same test ``run_dev.py`` uses
to match a returned directive). A missed label is put down to one cause, read from the
markdown block that holds the line:

- ``table row`` — a row of a markdown table;
- ``prose paragraph`` — a paragraph the parser did not take as a rule (long, several
  sentences, or no cue/imperative start): the labelled sentence sits inside prose;
- ``list item as context`` — a list item kept as context (inventory, command, narrative…);
- ``list item dropped`` — any other list item that gave no directive (a label, trivial);
- ``merged restatement`` — a directive covered it before restatements were merged;
- ``code block`` — inside a fenced or indented code block;
- ``heading`` — a heading line;
- ``front matter`` — the YAML front matter;
- ``other`` — blockquote, HTML or anything else.

Run alone: ``.venv/bin/python bench/rules_eval/parse_coverage.py [--show CAUSE]``; ``run_dev.py``
prints the same "parse coverage" line per set.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import dev_set as ds  # noqa: E402

import rules_parser.foreign as foreign  # noqa: E402
from rules_parser import load  # noqa: E402
from rules_parser.blocks import (  # noqa: E402
    Block,
    BlockQuote,
    Fence,
    Heading,
    ListBlock,
    Other,
    Paragraph,
    parse_blocks,
)
from rules_parser.frontmatter import split_front_matter  # noqa: E402
from rules_parser.models import RuleDocument  # noqa: E402

CAUSES = (
    "table row",
    "prose paragraph",
    "list item as context",
    "list item dropped",
    "merged restatement",
    "code block",
    "heading",
    "front matter",
    "other",
)


def _spans(document: RuleDocument | None) -> list[tuple[int, int]]:
    if document is None:
        return []
    return [(d.line_start, d.line_end) for d in document.directives]


def _covered(spans: Sequence[tuple[int, int]], line: int) -> bool:
    return any(start <= line <= end for start, end in spans)


def _innermost(blocks: Sequence[Block], line: int) -> Iterator[Block]:
    """The chain of blocks holding ``line``, outermost first."""
    for block in blocks:
        if not block.line_start <= line <= block.line_end:
            continue
        yield block
        if isinstance(block, ListBlock):
            for item in block.items:
                if item.line_start <= line <= item.line_end:
                    yield from _innermost(item.blocks, line)
        elif isinstance(block, BlockQuote):
            yield from _innermost(block.blocks, line)
        return


class FileParse:
    """One file parsed twice: as memoir parses it, and without merging restatements."""

    def __init__(self, set_name: str, file: str) -> None:
        path = ds.PUBLIC / set_name / file
        self.lines = path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")
        result = load(path, display_path=file)
        self.document = result.document
        self.spans = _spans(result.document)
        with mock.patch.object(foreign, "merge_restatements", list):
            self.unmerged = _spans(load(path, display_path=file).document)
        fm = split_front_matter(self.lines)
        self.front_end = fm.line_end if fm is not None else 0
        body = ["" if i < self.front_end else line for i, line in enumerate(self.lines)]
        self.blocks = parse_blocks("\n".join(body))
        self.context = self.document.context if self.document else ()

    def cause(self, line: int, text: str) -> str | None:
        """None when covered, else the cause of the miss."""
        if _covered(self.spans, line):
            return None
        if _covered(self.unmerged, line):
            return "merged restatement"
        if line <= self.front_end:
            return "front matter"
        chain = list(_innermost(self.blocks, line))
        if not chain:
            return "other"
        inner = chain[-1]
        if isinstance(inner, Fence):
            return "code block"
        if isinstance(inner, Heading):
            return "heading"
        if isinstance(inner, Other):
            return "table row" if inner.kind == "table" else "other"
        if any(isinstance(b, ListBlock) for b in chain):
            probe = text.strip()[:40]
            if any(probe and probe in c for c in self.context):
                return "list item as context"
            return "list item dropped"
        if isinstance(inner, Paragraph):
            return "prose paragraph"
        return "other"


def coverage(
    set_name: str, labels: Sequence[ds.Label]
) -> tuple[int, Counter[str], list[tuple[str, ds.Label]]]:
    """(covered labels, misses per cause, the misses) over the distinct labelled lines."""
    parses: dict[str, FileParse] = {}
    seen: set[tuple[str, int]] = set()
    covered = 0
    causes: Counter[str] = Counter()
    misses: list[tuple[str, ds.Label]] = []
    for label in labels:
        if (label.file, label.line) in seen:
            continue
        seen.add((label.file, label.line))
        if label.file not in parses:
            parses[label.file] = FileParse(set_name, label.file)
        cause = parses[label.file].cause(label.line, label.text)
        if cause is None:
            covered += 1
        else:
            causes[cause] += 1
            misses.append((cause, label))
    return covered, causes, misses


def coverage_line(set_name: str, labels: Sequence[ds.Label]) -> str:
    covered, causes, _ = coverage(set_name, labels)
    total = covered + sum(causes.values())
    parts = ", ".join(f"{c} {n}" for c, n in causes.most_common())
    return f"parse coverage {set_name}: {covered}/{total} labelled lines" + (
        f"; missed: {parts}" if parts else ""
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", default=None, help="print the misses of this cause ('all')")
    args = parser.parse_args()
    by_set: dict[str, list[ds.Label]] = defaultdict(list)
    for task in ds.load_tasks():
        by_set[task.set].extend(task.labels)
    total_covered, total = 0, Counter[str]()
    for name in sorted(by_set):
        covered, causes, misses = coverage(name, by_set[name])
        total_covered += covered
        total.update(causes)
        print(coverage_line(name, by_set[name]))
        for cause, label in misses:
            if args.show in (cause, "all"):
                print(
                    f"    [{cause}] {label.file}:{label.line}: {label.source_line().strip()[:110]}"
                )
    n = total_covered + sum(total.values())
    parts = ", ".join(f"{c} {k}" for c, k in total.most_common())
    print(f"parse coverage ALL: {total_covered}/{n} labelled lines; missed: {parts}")


if __name__ == "__main__":
    main()
