"""Rebuild ``data/bitext_sample.csv`` from the original Bitext CSV (see ``data/SOURCES.md``).

    .venv/bin/python bench/layer_eval/make_sample.py <path to the original CSV>

A seeded, per-intent stratified sample: for each of the 27 intents, 8 rows to memorize and 4
held-out rows whose user request serves as a query. The original columns are kept as they are;
one column, ``split`` (``memorize`` or ``query``), is added.
"""

from __future__ import annotations

import csv
import random
import sys
from collections import defaultdict
from pathlib import Path

PER_INTENT_MEMORIZE = 8
PER_INTENT_QUERY = 4
SEED = 4514
OUT = Path(__file__).parent / "data" / "bitext_sample.csv"


def main(source: Path) -> None:
    with source.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    by_intent: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_intent[row["intent"]].append(row)
    rng = random.Random(SEED)
    out: list[dict[str, str]] = []
    for intent in sorted(by_intent):
        chosen = rng.sample(by_intent[intent], PER_INTENT_MEMORIZE + PER_INTENT_QUERY)
        for n, row in enumerate(chosen):
            split = "memorize" if n < PER_INTENT_MEMORIZE else "query"
            out.append({**row, "split": split})
    with OUT.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=[*fields, "split"])
        writer.writeheader()
        writer.writerows(out)
    print(f"wrote {len(out)} rows to {OUT}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
