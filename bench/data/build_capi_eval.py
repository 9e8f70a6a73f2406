"""Build the labelled retrieval set from SQLite's C API documentation (public domain).

``sqlite3.h`` documents every interface in a ``CAPI3REF: <title>`` comment block; the SQLite
authors disclaim copyright ("The author disclaims copyright to this source code"). Each block
becomes a document (its body, without the title), and each title becomes a query whose one
relevant document is its own block: a known-item task where the query is a short paraphrase-
like heading ("Closing A Database Connection") and the answer must be found from the prose.

Usage: python bench/data/build_capi_eval.py [/usr/include/sqlite3.h] > bench/data/sqlite_capi_eval.jsonl
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_BLOCK = re.compile(r"/\*\*?\n\*\* CAPI3REF: (?P<title>[^\n]+)\n(?P<body>.*?)\*/", re.DOTALL)
_MARKERS = re.compile(r"\[(?:[^\]|]+\|)?([^\]]+)\]")  # [sqlite3_open()|open] -> open


def clean(body: str) -> str:
    lines = []
    for line in body.splitlines():
        line = re.sub(r"^\*\*\s?", "", line.rstrip())
        if (
            line.startswith("KEYWORDS:")
            or line.startswith("METHOD:")
            or line.startswith("EXPERIMENTAL")
        ):
            continue
        lines.append(line)
    text = "\n".join(lines).strip()
    text = _MARKERS.sub(r"\1", text)
    text = re.sub(r"</?[a-z]+[^>]*>", " ", text)  # ^<b>…</b>, <pre>, <li>
    text = text.replace("^", "")
    return re.sub(r"[ \t]+", " ", text).strip()


def main() -> None:
    source = Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/include/sqlite3.h")
    header = source.read_text(encoding="utf-8", errors="replace")
    seen: set[str] = set()
    for index, match in enumerate(_BLOCK.finditer(header)):
        title = match["title"].strip()
        body = clean(match["body"])
        if len(body.split()) < 20 or title.lower() in seen:
            continue
        seen.add(title.lower())
        record = {"id": f"capi-{index:03d}", "query": title, "text": body}
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
