"""The public dev set: real rule files of public repositories and the tasks labelled on them.

Layout (all under ``bench/rules_eval/``):

- ``public/<owner>__<repo>/…`` — each repository's rule files in their real layout;
- ``public/SOURCES.md`` — one row per file: set, path, source repository, commit, license;
- ``dev_tasks.json`` — the labelled tasks.

A label names a rule line of the ORIGINAL file, independent of memoir's parser:
``{"file": <path inside the set>, "line": <1-based line>, "text": <verbatim substring of
that line>, "prohibition": <bool>}``. ``prohibition`` is true when the source line forbids
something ("Do not …", "Never …", "NO …", an item under a "don't" heading).

A task is ``paraphrased`` when it shares no content word with any of its labelled lines;
:func:`content_words` is the (deliberately simple, parser-independent) definition used by
both the runner's report and the well-formedness test.

This module has no memoir imports: the test and the runner both use it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PUBLIC = HERE / "public"
TASKS = HERE / "dev_tasks.json"
SOURCES = PUBLIC / "SOURCES.md"

_STOP_TEXT = """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing don down during each
    etc every few for from further had has have having he her here hers him his how i if in
    into is it its itself just me more most my no nor not now of off on once only or other
    our ours out over own same she should so some such than that the their them then there
    these they this those through to too under until up us very was we were what when where
    which while who whom why will with would you your yours e.g i.e via vs let lets get gets
    make makes made new use uses used using add adds added want need needs one two way ways
    must never always don't do not without instead rather like"""
STOPWORDS = frozenset(_STOP_TEXT.split())
_WORD = re.compile(r"[a-z0-9]+")


def _stem(word: str) -> str:
    for suffix in ("ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
    return word


def content_words(text: str) -> frozenset[str]:
    """Lower-cased, crudely stemmed words of ``text`` minus stopwords (length > 1)."""
    words = _WORD.findall(text.casefold())
    stems = (_stem(w) for w in words if w not in STOPWORDS and len(w) > 1)
    return frozenset(s for s in stems if s not in STOPWORDS)


@dataclass(frozen=True)
class Label:
    set: str
    file: str
    line: int
    text: str
    prohibition: bool

    def source_line(self) -> str:
        return read_lines(self.set, self.file)[self.line - 1]


@dataclass(frozen=True)
class Task:
    id: str
    set: str
    task: str
    paraphrased: bool
    labels: tuple[Label, ...]


_LINES: dict[tuple[str, str], list[str]] = {}


def read_lines(set_name: str, file: str) -> list[str]:
    key = (set_name, file)
    if key not in _LINES:
        path = PUBLIC / set_name / file
        _LINES[key] = path.read_text(encoding="utf-8").splitlines()
    return _LINES[key]


def set_names() -> list[str]:
    return sorted(p.name for p in PUBLIC.iterdir() if p.is_dir())


def set_files(set_name: str) -> list[str]:
    root = PUBLIC / set_name
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def load_tasks(path: Path = TASKS) -> list[Task]:
    spec: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    tasks = []
    for raw in spec["tasks"]:
        labels = tuple(
            Label(raw["set"], lab["file"], int(lab["line"]), lab["text"], bool(lab["prohibition"]))
            for lab in raw["labels"]
        )
        tasks.append(Task(raw["id"], raw["set"], raw["task"], bool(raw["paraphrased"]), labels))
    return tasks


def shared_words(task: Task) -> frozenset[str]:
    """Content words the task shares with its labelled source lines (empty = paraphrased)."""
    words: set[str] = set()
    for label in task.labels:
        words |= content_words(label.source_line())
    return content_words(task.task) & frozenset(words)


def resolve_line(set_name: str, file: str, text: str) -> int:
    """The 1-based line of ``file`` holding ``text`` (it must be on exactly one line)."""
    hits = [i + 1 for i, line in enumerate(read_lines(set_name, file)) if text in line]
    if len(hits) != 1:
        raise ValueError(f"{set_name}/{file}: {text!r} is on {len(hits)} lines {hits[:5]}")
    return hits[0]


def parse_sources() -> dict[tuple[str, str], dict[str, str]]:
    """SOURCES.md rows keyed by (set, path): repository, commit, license."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("set", "---") or set(cells[0]) <= {"-"}:
            continue
        set_name, path, repo, commit, license_ = cells
        rows[(set_name, path)] = {"repo": repo, "commit": commit, "license": license_}
    return rows
