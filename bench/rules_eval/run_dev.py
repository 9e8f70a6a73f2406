"""Directive retrieval on real public rule files: memoir against baselines, per repository set.

The dev set (``dev_set.py``, ``dev_tasks.json``, ``public/``) holds the rule files of public
repositories in their real layout and coding tasks labelled with the ORIGINAL source lines a
senior engineer would want an agent to see. For each set, in one run and one store (the real
local embedder), we measure at the same token budget (default 900):

- ``memoir:folder`` — ``RulesService.query_directives`` after ``memoir rules upsert <folder>``
  (the folder's own discovery, as a new user would run it);
- ``memoir:files`` — the same after naming every file of the set on the command line;
- ``bm25``, ``dense`` (the local embedder), ``hybrid`` (reciprocal-rank fusion of the two) and
  ``keyword`` (shared content words) over the SAME parsed directives as ``memoir:files``,
  packed by memoir's own renderer (``pack_directives``) into the same budget;
- ``oracle:hybrid`` — the labelled source lines of the set's tasks as the directive set (a
  perfect parse), ranked by ``hybrid``: parsing loss = oracle − baseline on memoir's parse,
  ranking loss = 1 − oracle.

Metrics per task, averaged per set and overall (macro over tasks): recall (labels found in
the block), precision (returned directives matching any label of the task), tokens used,
directives returned, and polarity errors (returned directives whose source line is a
prohibition but whose rendered line — memoir's marker, e.g. ``MUST NOT`` or ``ASK FIRST``, then
the text — reads as a positive instruction). Per set, a "parse coverage" line
(``parse_coverage.py``) says how many labelled lines memoir's parser turns into (part of) a
directive, and why the others are missed.

Matching a returned directive to a label: same file (path inside the set) and the labelled
line within the directive's ``line_start..line_end``; if the directive carries no line span, a
fuzzy text match instead (same file when known, and ≥ 0.6 of the label line's content words
found in the directive text, or a difflib ratio ≥ 0.8 of the normalised texts).

A directive's source is a prohibition when its first source line is labelled so, or (for
unlabelled lines) when that line or its nearest heading reads as one (``do not``, ``don't``, ``never``, ``avoid``, ``NOT``,
``forbidden``, ``no …``); the rendered text reads as positive when it has none of those words.

Run: ``.venv/bin/python bench/rules_eval/run_dev.py [--budget 900] [--sets a,b] [--json out]
[--no-sample]``. Without ``--no-sample`` the ``sample_rules`` measurement of ``run_eval.py``
runs too (the "no worse than today" check).
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import dev_set as ds  # noqa: E402
from parse_coverage import coverage_line  # noqa: E402

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.errors import EmptyKnowledgeGraphError  # noqa: E402
from memory_core.rules.context_block import pack_directives  # noqa: E402
from memory_core.rules.models import RankedDirective, ScoreBreakdown  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402
from rules_parser.polarity import directive_marker  # noqa: E402

SHOW_POLARITY = False
_ENV = {k: v for k, v in os.environ.items() if k.startswith("MEMOIR_RULES__")}
HEADER = "## Project rules for this task\n"
METHODS = (
    "memoir:folder",
    "memoir:files",
    "bm25",
    "dense",
    "hybrid",
    "keyword",
    "oracle:hybrid",
    "oracle:memoir",
)
_NEG = re.compile(
    r"\b(do not|don't|dont|never|avoid|not|no|forbidden|prohibited|must not|shouldn't|"
    r"cannot|can't|without|instead of|rather than|nor)\b",
    re.IGNORECASE,
)
# A heading that announces prohibitions ("Do Not", "What NOT to do", "Never do",
# "7. Common pitfalls to avoid", "⚠️ Do NOT use …"), not one that merely contains "never".
_NEG_HEADING = re.compile(
    r"^(what\s+)?(not|don'?t|do not|never|avoid|anti-?patterns?|forbidden|prohibited|"
    r"(common\s+)?(pitfalls|mistakes))\b|\b(DO NOT|NOT)\b",
)


# ---------------------------------------------------------------------------------------------
# Candidates: one directive as the evaluation sees it, whoever parsed it.


@dataclass
class Candidate:
    uid: str
    rule_id: str
    file: str | None  # path inside the set
    line_start: int | None
    line_end: int | None
    text: str
    severity: str = "SHOULD"
    section: tuple[str, ...] = ()
    polarity: str = "do"
    tokens: list[str] = field(default_factory=list)


def tokens(text: str) -> list[str]:
    """Content-word tokens (with repeats) for BM25 and keyword overlap."""
    words = ds._WORD.findall(text.casefold())
    stems = (ds._stem(w) for w in words if w not in ds.STOPWORDS and len(w) > 1)
    return [s for s in stems if s not in ds.STOPWORDS]


class BM25:
    def __init__(self, docs: Sequence[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(d) for d in docs]
        self.lengths = [len(d) for d in docs]
        self.avg = statistics.mean(self.lengths) if docs else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: list[str]) -> np.ndarray:
        out = np.zeros(len(self.docs))
        for i, (d, length) in enumerate(zip(self.docs, self.lengths, strict=True)):
            norm = self.k1 * (1 - self.b + self.b * length / (self.avg or 1))
            out[i] = sum(
                self.idf[t] * d[t] * (self.k1 + 1) / (d[t] + norm) for t in set(query) if t in d
            )
        return out


def rrf(*rankings: Sequence[int], k: int = 60) -> list[int]:
    score: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, index in enumerate(ranking):
            score[index] += 1 / (k + rank + 1)
    return sorted(score, key=lambda i: -score[i])


# ---------------------------------------------------------------------------------------------
# Matching returned directives to labels.


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[`*_#>|\[\]()-]+", " ", text.casefold()).split())


def matches(c: Candidate, label: ds.Label) -> bool:
    if c.file is not None and c.file != label.file:
        return False
    if c.line_start is not None:
        end = c.line_end if c.line_end is not None else c.line_start
        return c.line_start <= label.line <= end
    source = label.source_line()
    words = ds.content_words(source)
    if words and len(words & ds.content_words(c.text)) >= 0.6 * len(words):
        return True
    return difflib.SequenceMatcher(None, _norm(source), _norm(c.text)).ratio() >= 0.8


def source_is_prohibition(c: Candidate, set_name: str, labels: dict[tuple[str, int], bool]) -> bool:
    if c.file is None or c.line_start is None:
        return bool(_NEG.search(c.text))
    # The directive's first source line decides (a multi-line span may hold sub-bullets of
    # the other polarity).
    if (c.file, c.line_start) in labels:
        return labels[(c.file, c.line_start)]
    try:
        lines = ds.read_lines(set_name, c.file)
    except OSError:
        return False
    if c.line_start > len(lines):
        return False
    if _NEG.search(lines[c.line_start - 1]):
        return True
    for line in reversed(lines[: c.line_start - 1]):
        if line.lstrip().startswith("#"):
            title = re.sub(r"^[^A-Za-z]+", "", line.strip().lstrip("#"))
            return bool(_NEG_HEADING.search(title) or _NEG_HEADING.search(title.casefold()))
    return False


def reads_positive(rendered: str) -> bool:
    """The rendered line (marker + text) reads as an instruction to do it: no negation and
    not the ``ASK FIRST`` marker."""
    return not rendered.startswith("ASK FIRST") and not _NEG.search(rendered)


def render(severity: str, polarity: str, text: str) -> str:
    return f"{directive_marker(severity, polarity, text)} {text}"


# ---------------------------------------------------------------------------------------------
# Packing baselines with memoir's renderer.

_ZERO = ScoreBreakdown(
    authority=0,
    when_to_apply=0,
    layer_match=0,
    topic_overlap=0,
    severity_boost=0,
    semantic_sim=0,
    weights={},
    total=0,
)


def _ranked(c: Candidate) -> RankedDirective:
    return RankedDirective(
        directive_id=c.uid,
        rule_id=c.rule_id,
        text=c.text,
        severity=c.severity if c.severity in ("MUST", "SHOULD", "MAY") else "SHOULD",  # type: ignore[arg-type]
        polarity=c.polarity if c.polarity in ("do", "dont", "ask") else "do",  # type: ignore[arg-type]
        source_path=c.file or "",
        line_start=c.line_start,
        line_end=c.line_end,
        score=0,
        breakdown=_ZERO,
    )


def pack(
    order: Sequence[int], pool: Sequence[Candidate], budget: int, count: Callable[[str], int]
) -> tuple[list[Candidate], int, list[str]]:
    by_uid = {pool[i].uid: pool[i] for i in order}
    packed = pack_directives(
        [_ranked(pool[i]) for i in order],
        header=HEADER,
        budget=budget,
        safety_cap=budget,
        count=count,
    )
    chosen = [by_uid[d.directive_id] for d in packed.selected]
    rendered = [render(d.severity, d.polarity, d.text) for d in packed.selected]
    return chosen, packed.tokens_used, rendered


# ---------------------------------------------------------------------------------------------
# One set.


@dataclass
class TaskResult:
    recall: float
    precision: float
    tokens: int
    returned: int
    polarity_errors: int
    paraphrased: bool


def _score(
    task: ds.Task,
    chosen: Sequence[Candidate],
    rendered: Sequence[str],
    used: int,
    polarity: dict[tuple[str, int], bool],
) -> TaskResult:
    found = sum(1 for label in task.labels if any(matches(c, label) for c in chosen))
    useful = sum(1 for c in chosen if any(matches(c, label) for label in task.labels))
    flipped = [
        (c, text)
        for c, text in zip(chosen, rendered, strict=True)
        if source_is_prohibition(c, task.set, polarity) and reads_positive(text)
    ]
    if SHOW_POLARITY:
        for c, text in flipped:
            print(f"  polarity {task.set}/{c.file}:{c.line_start}: {text[:100]}", file=sys.stderr)
    errors = len(flipped)
    return TaskResult(
        recall=found / len(task.labels),
        precision=useful / len(chosen) if chosen else 0.0,
        tokens=used,
        returned=len(chosen),
        polarity_errors=errors,
        paraphrased=task.paraphrased,
    )


def _relative(uri: str, root: Path) -> str:
    path = Path(uri)
    if path.is_absolute():
        try:
            return str(path.resolve().relative_to(root))
        except ValueError:
            return uri
    return uri


async def _candidates(service: RulesService, scope: str, root: Path) -> list[Candidate]:
    index = await service._index(Scope.of(scope))  # the same index the ranker reads
    return [
        Candidate(
            uid=d.uid,
            rule_id=d.rule_id,
            file=_relative(d.uri, root),
            line_start=d.line_start,
            line_end=d.line_end,
            text=d.statement,
            severity=d.severity,
            section=d.section,
            polarity=d.polarity,
        )
        for d in index.directives.values()
    ]


def oracle_text(line: str) -> str:
    """A labelled source line as a bare directive: no bullet, number or table pipes."""
    line = line.strip()
    if line.startswith("|"):
        cells = [c.strip() for c in line.strip("|").split("|")]
        line = next((c for c in cells if c), line)
    return re.sub(r"^(?:[-*+]|\d+\.)\s+", "", line).strip()


def write_oracle_docs(pool: Sequence[Candidate], folder: Path) -> dict[tuple[str, int], Candidate]:
    """The oracle directives as plain bullet documents (one per source file) for memoir to
    ingest; returns (document path, line) -> the oracle candidate written there."""
    by_file: dict[str, list[Candidate]] = defaultdict(list)
    for c in pool:
        by_file[c.file or ""].append(c)
    where: dict[tuple[str, int], Candidate] = {}
    folder.mkdir(parents=True, exist_ok=True)
    for file, items in by_file.items():
        name = file.replace("/", "__").lstrip(".") + ".md"
        lines = [f"# Rules from {file}", ""]
        for c in sorted(items, key=lambda c: c.line_start or 0):
            lines.append(f"- {c.text}")
            where[(str(folder / name), len(lines))] = c
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return where


def _oracle_pool(tasks: Sequence[ds.Task]) -> list[Candidate]:
    seen: dict[tuple[str, int], Candidate] = {}
    for task in tasks:
        for label in task.labels:
            key = (label.file, label.line)
            if key not in seen:
                text = oracle_text(label.source_line())
                seen[key] = Candidate(
                    uid=f"oracle:{label.file}:{label.line}",
                    rule_id=label.file,
                    file=label.file,
                    line_start=label.line,
                    line_end=label.line,
                    text=text,
                    severity="SHOULD",
                )
    return list(seen.values())


async def _dense_vectors(memoir: Memoir, pool: Sequence[Candidate]) -> np.ndarray:
    if not pool:
        return np.zeros((0, memoir.embedder.dimension))
    vectors = await memoir.embedder.embed_documents([c.text for c in pool])
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _ingested(report: Any) -> int:
    """Documents that gave at least one directive."""
    return sum(1 for d in report.documents if d.directives)


async def evaluate_set(
    set_name: str, tasks: Sequence[ds.Task], budget: int, embedder: str
) -> dict[str, Any]:
    root = (ds.PUBLIC / set_name).resolve()
    files = [str(root / f) for f in ds.set_files(set_name)]
    polarity = {(lab.file, lab.line): lab.prohibition for t in tasks for lab in t.labels}
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(cwd=Path(tmp), environ=_ENV)
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/eval.db", settings=settings, embedder=create_embedder(embedder)
        )
        service = RulesService(memoir.context, cwd=root)
        try:
            await memoir.embedder.ensure_loaded()
            folder = await service.upsert_markdown(
                [str(root)], scope="folder", allowed_roots=[str(root)]
            )
            named = await service.upsert_markdown(files, scope="files", allowed_roots=[str(root)])
            pool = await _candidates(service, "files", root)
            oracle = _oracle_pool(tasks)
            oracle_dir = Path(tmp) / "oracle"
            oracle_at = write_oracle_docs(oracle, oracle_dir)
            oracle_docs = sorted({str(p) for p, _ in oracle_at})
            await service.upsert_markdown(
                oracle_docs, scope="oracle", allowed_roots=[str(oracle_dir)]
            )
            count = memoir.tokens.count
            bm25 = BM25([tokens(" ".join((c.text, *c.section))) for c in pool])
            oracle_bm25 = BM25([tokens(c.text) for c in oracle])
            vectors = await _dense_vectors(memoir, pool)
            oracle_vectors = await _dense_vectors(memoir, oracle)
            results: dict[str, list[TaskResult]] = {m: [] for m in METHODS}
            answers: dict[str, list[list[Any]]] = {}  # memoir:folder's, for --answers
            for task in tasks:
                for scope, method in (("folder", "memoir:folder"), ("files", "memoir:files")):
                    try:
                        answer = await service.query_directives(
                            task.task, scope=scope, token_budget=budget
                        )
                    except EmptyKnowledgeGraphError:  # nothing was ingested: an empty block
                        results[method].append(TaskResult(0.0, 0.0, 0, 0, 0, task.paraphrased))
                        continue
                    chosen = [
                        Candidate(
                            uid=d.directive_id,
                            rule_id=d.rule_id,
                            file=_relative(d.source_path, root),
                            line_start=d.line_start,
                            line_end=d.line_end,
                            text=d.text,
                            severity=d.severity,
                            polarity=d.polarity,
                        )
                        for d in answer.directives
                    ]
                    rendered = [render(d.severity, d.polarity, d.text) for d in answer.directives]
                    results[method].append(
                        _score(task, chosen, rendered, answer.diagnostics.tokens_used, polarity)
                    )
                    if method == "memoir:folder":
                        answers[task.id] = [[c.file, c.line_start, c.text] for c in chosen]
                answer = await service.query_directives(
                    task.task, scope="oracle", token_budget=budget
                )
                chosen = []
                for d in answer.directives:
                    doc = str((oracle_dir / d.source_path).resolve())
                    hit = oracle_at.get((doc, d.line_start or -1))
                    chosen.append(
                        hit
                        or Candidate(
                            d.directive_id, d.rule_id, None, None, None, d.text, d.severity
                        )
                    )
                rendered = [render(d.severity, d.polarity, d.text) for d in answer.directives]
                results["oracle:memoir"].append(
                    _score(task, chosen, rendered, answer.diagnostics.tokens_used, polarity)
                )
                query_tokens = tokens(task.task)
                query = await memoir.embedder.embed_query(task.task)
                query = query / (np.linalg.norm(query) or 1)
                lexical = [int(i) for i in np.argsort(-bm25.scores(query_tokens), kind="stable")]
                lexical = [i for i in lexical if bm25.scores(query_tokens)[i] > 0] or lexical
                semantic = [int(i) for i in np.argsort(-(vectors @ query), kind="stable")]
                task_words = set(query_tokens)
                overlap = [len(task_words & set(c.tokens or tokens(c.text))) for c in pool]
                keyword = sorted(
                    (i for i, n in enumerate(overlap) if n), key=lambda i: (-overlap[i], i)
                )
                o_lex = [
                    int(i) for i in np.argsort(-oracle_bm25.scores(query_tokens), kind="stable")
                ]
                o_sem = [int(i) for i in np.argsort(-(oracle_vectors @ query), kind="stable")]
                for method, order, source in (
                    ("bm25", lexical, pool),
                    ("dense", semantic, pool),
                    ("hybrid", rrf(lexical, semantic), pool),
                    ("keyword", keyword, pool),
                    ("oracle:hybrid", rrf(o_lex, o_sem), oracle),
                ):
                    chosen, used, rendered = pack(order, source, budget, count)
                    results[method].append(_score(task, chosen, rendered, used, polarity))
            return {
                "set": set_name,
                "files": len(files),
                "documents_folder": _ingested(folder),
                "documents_files": _ingested(named),
                "skipped_folder": [
                    f"{d.path} ({d.status})" for d in folder.documents if not d.directives
                ],
                "directives_files": len(pool),
                "oracle_directives": len(oracle),
                "tasks": len(tasks),
                "results": results,
                "answers": answers,
            }
        finally:
            await service.close()  # its queued run records go out before the store shuts
            await memoir.close()


# ---------------------------------------------------------------------------------------------
# Report.


def summarise(results: Sequence[TaskResult]) -> dict[str, float]:
    literal = [r.recall for r in results if not r.paraphrased]
    para = [r.recall for r in results if r.paraphrased]
    returned = sum(r.returned for r in results)
    return {
        "recall": round(statistics.mean(r.recall for r in results), 3),
        "recall_literal": round(statistics.mean(literal), 3) if literal else float("nan"),
        "recall_paraphrased": round(statistics.mean(para), 3) if para else float("nan"),
        "precision": round(statistics.mean(r.precision for r in results), 3),
        "tokens": round(statistics.mean(r.tokens for r in results), 1),
        "returned": round(statistics.mean(r.returned for r in results), 1),
        "polarity_errors": sum(r.polarity_errors for r in results),
        "polarity_error_rate": round(
            sum(r.polarity_errors for r in results) / returned if returned else 0.0, 3
        ),
    }


def table(rows: list[tuple[str, str, dict[str, float]]]) -> str:
    head = (
        "| set | method | recall | lit | para | precision | tokens | returned | polarity err |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    lines = [head]
    for set_name, method, s in rows:
        lines.append(
            f"| {set_name} | {method} | {s['recall']:.3f} | {s['recall_literal']:.3f} | "
            f"{s['recall_paraphrased']:.3f} | {s['precision']:.3f} | {s['tokens']:.0f} | "
            f"{s['returned']:.1f} | {s['polarity_errors']:.0f} ({s['polarity_error_rate']:.2f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=900)
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--sets", default=None, help="comma-separated set names (default: all)")
    parser.add_argument("--json", type=Path, default=None, help="write the summary here")
    parser.add_argument("--no-sample", action="store_true", help="skip the sample_rules row")
    parser.add_argument("--per-set", action="store_true", help="print every set's rows")
    parser.add_argument(
        "--answers", type=Path, default=None, help="write memoir:folder's directives per task here"
    )
    parser.add_argument(
        "--show-polarity", action="store_true", help="print each polarity error (stderr)"
    )
    args = parser.parse_args()
    global SHOW_POLARITY
    SHOW_POLARITY = args.show_polarity
    tasks = ds.load_tasks()
    by_set: dict[str, list[ds.Task]] = defaultdict(list)
    for task in tasks:
        by_set[task.set].append(task)
    names = args.sets.split(",") if args.sets else sorted(by_set)
    started = time.perf_counter()
    rows: list[tuple[str, str, dict[str, float]]] = []
    overall: dict[str, list[TaskResult]] = defaultdict(list)
    detail: list[dict[str, Any]] = []
    answers: dict[str, Any] = {}
    for name in names:
        out = anyio.run(evaluate_set, name, by_set[name], args.budget, args.embedder)
        out["parse_coverage"] = coverage_line(name, [lab for t in by_set[name] for lab in t.labels])
        print(out["parse_coverage"], file=sys.stderr)
        print(
            f"{name}: {out['files']} files; documents giving directives: folder upsert "
            f"{out['documents_folder']}, naming every file {out['documents_files']} "
            f"({out['directives_files']} directives); {out['tasks']} tasks",
            file=sys.stderr,
        )
        for method in METHODS:
            summary = summarise(out["results"][method])
            rows.append((name, method, summary))
            overall[method].extend(out["results"][method])
        answers.update(out["answers"])
        detail.append(
            {k: v for k, v in out.items() if k not in ("results", "answers")}
            | {"summary": {m: summarise(out["results"][m]) for m in METHODS}}
        )
    total = [("ALL", m, summarise(overall[m])) for m in METHODS]
    print(f"\n## Public dev set: {len(names)} sets, budget {args.budget} tokens\n")
    print(table((rows if args.per_set else []) + total))
    sample = None
    if not args.no_sample:
        import run_eval

        sample = anyio.run(
            run_eval._evaluate, HERE / "sample_tasks.json", args.budget, False, args.embedder, None
        )
        print(
            f"\nsample_rules ({sample['tasks']} tasks): recall memoir {sample['recall']['memoir']}"
            f" · keyword {sample['recall']['keyword']} · tokens memoir "
            f"{sample['tokens_mean']['memoir']}"
        )
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if args.answers:
        args.answers.write_text(json.dumps(answers, indent=1), encoding="utf-8")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "budget": args.budget,
                    "sets": detail,
                    "overall": {m: s for _, m, s in total},
                    "sample_rules": sample,
                },
                indent=1,
            ),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
