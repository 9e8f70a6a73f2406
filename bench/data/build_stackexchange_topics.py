"""Build the labelled topic corpus of ``bench/bench_knowledge_tree.py`` from Stack Exchange dumps.

Five Stack Exchange sites are five known topics. Each site's ``Posts.xml`` (the public data dump,
CC BY-SA 3.0) is read from a public GitHub repository that holds a copy (see ``SOURCES.md``); for
each site the first ``--per-site`` questions (by post id) with an accepted answer of 200-2500
characters and a positive score are kept: the question title and body, and the accepted answer.

Usage:
    python bench/data/build_stackexchange_topics.py MIRROR_ROOT > bench/data/stackexchange_topics.jsonl

``MIRROR_ROOT`` holds one git mirror per repository as ``owner+name/repo`` (what the search tool's
``fetch`` writes); the exact commits below are read with ``git show``.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

# site -> (repository, commit, path of Posts.xml)
SITES: dict[str, tuple[str, str, str]] = {
    "beer.stackexchange.com": (
        "kevswanberg/beer_tentrr",
        "9573647bff33c61bdce2f07a9000a4098fd3074d",
        "Posts.xml",
    ),
    "coffee.stackexchange.com": (
        "Yoav-Shafir/Elasticsearch-Coffee-Search-Engine-JS",
        "97e93c92aaa379fed6d0ee9be94b2024371d6aba",
        "Posts.xml",
    ),
    "ai.stackexchange.com": (
        "gjee1303/Programming-for-BigData-Assignments--NYU",
        "202b065dc319957bd8bb80370c1b304221980d89",
        "xmlregex/Posts.xml",
    ),
    "quantumcomputing.stackexchange.com": (
        "Jean-Low/StackERedes",
        "b6ea69d57d00b90370d0b6f89fae522ffebf6a6e",
        "data/Posts.xml",
    ),
    "matheducators.stackexchange.com": (
        "jrfoster/spark-intro",
        "d242829803d27f4fca6a03065fd85749f505dbef",
        "Posts.xml",
    ),
}
_TAG = re.compile(r"<[^>]+>")
_BLOCK_END = re.compile(r"</(p|pre|li|blockquote|h\d)>|<br\s*/?>", re.IGNORECASE)


def plain(body: str) -> str:
    """Post HTML as plain text: paragraphs kept as blank-line breaks, tags and entities gone."""
    text = _BLOCK_END.sub("\n\n", body)
    text = html.unescape(_TAG.sub("", text))
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return "\n\n".join(p for p in paragraphs if p)


def read_posts(mirror_root: Path, repo: str, commit: str, path: str) -> bytes:
    git_dir = mirror_root / repo.replace("/", "+") / "repo"
    if (git_dir / ".git").is_dir():
        git_dir = git_dir / ".git"
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
    ).stdout


def site_records(site: str, xml: bytes, per_site: int) -> list[dict[str, object]]:
    rows = [r.attrib for r in ET.fromstring(xml).iter("row")]
    by_id = {r["Id"]: r for r in rows}
    records: list[dict[str, object]] = []
    for row in sorted(rows, key=lambda r: int(r["Id"])):
        if row.get("PostTypeId") != "1" or int(row.get("Score", "0")) < 1:
            continue
        answer = by_id.get(row.get("AcceptedAnswerId", ""))
        if answer is None:
            continue
        answer_text = plain(answer.get("Body", ""))
        if not 200 <= len(answer_text) <= 2500:
            continue
        records.append(
            {
                "site": site,
                "question_id": int(row["Id"]),
                "answer_id": int(answer["Id"]),
                "title": html.unescape(row.get("Title", "")),
                "question": plain(row.get("Body", "")),
                "answer": answer_text,
                "url": f"https://{site}/q/{row['Id']}",
                "question_author": f"https://{site}/users/{row.get('OwnerUserId', '')}",
                "answer_author": f"https://{site}/users/{answer.get('OwnerUserId', '')}",
            }
        )
        if len(records) == per_site:
            break
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mirror_root", type=Path)
    parser.add_argument("--per-site", type=int, default=40)
    args = parser.parse_args()
    for site, (repo, commit, path) in SITES.items():
        records = site_records(
            site, read_posts(args.mirror_root, repo, commit, path), args.per_site
        )
        if len(records) < args.per_site:
            sys.exit(f"{site}: only {len(records)} usable questions")
        for record in records:
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
