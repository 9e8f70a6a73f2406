"""The public rules dev set (bench/rules_eval) is well-formed: real files, resolvable labels.

Fast and offline: reads the committed files only. A label names a line of an ORIGINAL rule
file (not memoir's parse), so every label must point at a real line holding its text.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
RESERVED = {
    "calcom/cal.com",
    "getsentry/sentry",
    "coder/coder",
    "dotnet/aspnetcore",
    "PatrickJS/awesome-cursorrules",
    "github/awesome-copilot",
    "cosai-oasis/project-codeguard",
}


def _dev_set() -> ModuleType:
    path = ROOT / "bench" / "rules_eval" / "dev_set.py"
    spec = importlib.util.spec_from_file_location("rules_eval_dev_set", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ds = _dev_set()


def test_at_least_100_tasks_over_8_repositories_with_unique_ids() -> None:
    tasks = ds.load_tasks()
    assert len(tasks) >= 100, len(tasks)
    ids = Counter(t.id for t in tasks)
    assert not [i for i, n in ids.items() if n > 1], "duplicate task ids"
    per_set = Counter(t.set for t in tasks)
    assert len(per_set) >= 8, per_set
    assert set(per_set) <= set(ds.set_names()), "a task names a set with no folder"
    assert all(n >= 10 for n in per_set.values()), per_set


def test_every_label_resolves_to_a_real_line_of_a_committed_file() -> None:
    for task in ds.load_tasks():
        assert task.task.strip(), task.id
        assert 1 <= len(task.labels) <= 4, (task.id, len(task.labels))
        for label in task.labels:
            path = ds.PUBLIC / task.set / label.file
            assert path.is_file(), f"{task.id}: {path} is not a committed file"
            lines = ds.read_lines(task.set, label.file)
            assert 1 <= label.line <= len(lines), f"{task.id}: line {label.line} of {path}"
            assert label.text.strip(), task.id
            assert label.text in lines[label.line - 1], (
                f"{task.id}: {label.file}:{label.line} does not hold {label.text!r}"
            )
            assert isinstance(label.prohibition, bool)


def test_a_third_of_tasks_are_paraphrased_and_share_no_content_word() -> None:
    tasks = ds.load_tasks()
    paraphrased = [t for t in tasks if t.paraphrased]
    assert 3 * len(paraphrased) >= len(tasks), (len(paraphrased), len(tasks))
    for task in paraphrased:
        assert not ds.shared_words(task), (task.id, sorted(ds.shared_words(task)))


def test_labels_mark_both_polarities() -> None:
    labels = [label for t in ds.load_tasks() for label in t.labels]
    prohibitions = sum(label.prohibition for label in labels)
    assert prohibitions >= 20 and len(labels) - prohibitions >= 20, prohibitions


def test_every_file_has_a_source_commit_and_license() -> None:
    sources = ds.parse_sources()
    files = {(s, f) for s in ds.set_names() for f in ds.set_files(s)}
    assert len(files) >= 8
    assert files == set(sources), (
        f"no SOURCES.md row: {sorted(files - set(sources))}; "
        f"row without a file: {sorted(set(sources) - files)}"
    )
    repos = set()
    for (set_name, _), row in sources.items():
        assert re.fullmatch(r"[0-9a-f]{40}", row["commit"]), row
        assert row["license"].strip(), row
        assert set_name == row["repo"].replace("/", "__"), row
        repos.add(row["repo"])
    assert len(repos) >= 8
    assert not repos & RESERVED, repos & RESERVED


def test_content_words_ignore_stopwords_and_inflection() -> None:
    assert ds.content_words("Never use the tests") == ds.content_words("using a test")
    assert not ds.content_words("do not do it")
