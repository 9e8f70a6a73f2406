"""Fit the ranking stage of ``query_directives`` (``memory_core/rules/rerank.py``) on the
public dev set, leave one repository out, against the baselines over the same parse.

One store, one folder upsert per set (``memoir rules upsert <folder>``, the real local
embedder), all in one run:

1. ``memoir:before`` — every task through ``query_directives`` with the order before the
   fusion (relevance × 100 + seed-003 total, ``candidate_k`` 30).
2. The same tasks again at ``--candidate-k`` (default 60), recording every candidate the
   ranking stage saw (its features) and whether it matches a label of the task.
3. Leave one repository out: for each set, a class-balanced, L2-regularised logistic
   regression of "matches a label" on the ranking features of the OTHER sets' candidates,
   turned into ``RankParams`` (weights in seed-003 points); the held-out set's tasks are then
   asked through the real ``query_directives`` with those weights (``memoir:after``, the
   figure reported). The fit on all sets is printed: it is what ``RankParams`` defaults to.
4. ``memoir:shipped`` — today's defaults, in-sample (for reference only).
5. BM25, dense and hybrid (RRF) over the same parsed directives, as in ``run_dev.py``.

Run: ``nice -n 10 .venv/bin/python bench/rules_eval/tune_rank.py [--sets a,b] [--json out]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_dev  # noqa: E402  (sets up sys.path for the repository)
from run_dev import BM25, Candidate, _relative, ds, matches, pack, rrf, tokens  # noqa: E402

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.rules import candidates as candidates_module  # noqa: E402
from memory_core.rules import graph as graph_module  # noqa: E402
from memory_core.rules import rerank  # noqa: E402
from memory_core.rules import service as service_module  # noqa: E402
from memory_core.rules.dictionaries import tokenize  # noqa: E402
from memory_core.rules.relevance import RelevanceGate  # noqa: E402
from memory_core.rules.rerank import RankParams  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

Row = tuple[float, float, int, int, bool]  # recall, precision, tokens, returned, paraphrased
# What a directive's vector is made of (``--embed-text``; "shipped" leaves
# ``memory_core.rules.graph.embed_text`` as it is). Texts joined by _JOIN are embedded one by
# one and their normalised mean is stored (still one vector per directive).
_JOIN = "\x1f"
_FULL = graph_module.embed_text


def _heading_statement(document: Any, directive: Any) -> str:
    return ". ".join(filter(None, (*directive.section_path[-1:], directive.text)))


def _no_file_title(document: Any, directive: Any) -> str:
    """The shipped text without a title that is only a file name ("CLAUDE.md. ...")."""
    text, title = _FULL(document, directive), document.title or document.rule_name
    if re.fullmatch(r"[\w.-]+\.mdc?", title, flags=re.IGNORECASE) and text.startswith(title + ". "):
        return text[len(title) + 2 :]
    return text


EMBED_TEXTS: dict[str, Any] = {
    "no-file-title": _no_file_title,
    "shipped": None,
    "statement": lambda d, x: x.text,
    "mean-statement": lambda d, x: _FULL(d, x) + _JOIN + x.text,
    "mean-heading": lambda d, x: _FULL(d, x) + _JOIN + _heading_statement(d, x),
}


def install_embed_text(memoir: Memoir, variant: str) -> None:
    """Swap what is embedded for a directive (measurement only)."""
    chosen = EMBED_TEXTS[variant]
    if chosen is None:
        return
    graph_module.embed_text = chosen  # type: ignore[assignment]
    plain = memoir.embedder.embed_documents

    async def embed_documents(texts: Sequence[str]) -> np.ndarray:
        groups = [t.split(_JOIN) for t in texts]
        matrix = await plain([p for g in groups for p in g])
        out, row = [], 0
        for g in groups:
            v = matrix[row : row + len(g)].mean(0)
            out.append(v / (np.linalg.norm(v) or 1.0))
            row += len(g)
        return np.vstack(out).astype(np.float32) if out else matrix

    memoir.embedder.embed_documents = embed_documents  # type: ignore[method-assign]


_IDENTIFIER = re.compile(r"\b[A-Za-z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b|\b\w+_\w+\b")


def split_identifiers(text: str) -> list[str]:
    """The lexical arm's tokens plus the parts of camelCase identifiers ("generateText" ->
    generate, text); snake_case is already split by the tokenizer. For ``--split-identifiers``
    (measured, not adopted: no effect on the dev set)."""
    out = tokenize(text)
    for ident in _IDENTIFIER.findall(text):
        parts = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", ident).replace("_", " ").split()
        out += [p.casefold() for p in parts if len(p) > 2]
    return out


# The order before the fusion (relevance first, seed-003 total breaking near-ties).
BEFORE = RankParams(
    relevance_weight=100.0,
    fusion_relevance=0.0,
    fusion_semantic=0.0,
    fusion_lexical=0.0,
    must_bonus=0.0,
)
CURVE_ITEMS = (2, 3, 5, 8, 12)
CURVE_GATES = ((0.3, 0.0), (0.4, 0.0), (0.5, 0.0), (0.1, 0.6), (0.1, 0.8))
FEATURES = ("total", "relevance", "fusion_relevance", "fusion_semantic", "fusion_lexical", "must")


def features(candidates: Sequence[rerank.Candidate], k: float) -> np.ndarray:
    """The ranking features of the candidates the gate keeps, in ``rank_candidates``'s
    order of computation (one row per candidate, columns as FEATURES)."""
    fused = {
        name: rerank._fusion(
            candidates,
            dataclasses.replace(
                BEFORE, fusion_k=k, **{n: (1.0 if n == name else 0.0) for n in FEATURES[2:5]}
            ),
        )
        for name in FEATURES[2:5]
    }
    return np.array(
        [
            [
                c.total,
                c.relevance,
                fused["fusion_relevance"][c.item_id],
                fused["fusion_semantic"][c.item_id],
                fused["fusion_lexical"][c.item_id],
                1.0 if c.must else 0.0,
            ]
            for c in candidates
        ]
    )


def fit(x: np.ndarray, y: np.ndarray, *, l2: float = 0.1, k: float = 10.0) -> RankParams:
    """Logistic regression (class-balanced, L2 on standardised features), as RankParams in
    seed-003 points (the total's coefficient is 1)."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    balance = np.where(y > 0, (len(y) - y.sum()) / max(y.sum(), 1.0), 1.0)
    for _ in range(600):
        p = 1 / (1 + np.exp(-z @ w))
        w -= 0.5 * (z.T @ ((p - y) * balance) / len(y) + l2 * np.r_[w[:-1], 0.0])
    raw = w[:-1] / sd
    if raw[0] <= 0:
        raise SystemExit(f"the fit gives the seed-003 total a non-positive weight: {raw}")
    points = dict(zip(FEATURES, (raw / raw[0]).round(1).tolist(), strict=True))
    return RankParams(
        relevance_weight=points["relevance"],
        fusion_relevance=points["fusion_relevance"],
        fusion_semantic=points["fusion_semantic"],
        fusion_lexical=points["fusion_lexical"],
        fusion_k=k,
        must_bonus=points["must"],
    )


def baseline_orders(
    task: str, query: np.ndarray, bm25: BM25, vectors: np.ndarray
) -> list[tuple[str, list[int]]]:
    """The baselines' orders of the parsed directives for one task: BM25 (rows with a score
    first), dense (cosine to ``query``, the task's embedding) and their RRF hybrid."""
    query = query / (np.linalg.norm(query) or 1)
    lexical_scores = bm25.scores(tokens(task))
    lexical = [int(i) for i in np.argsort(-lexical_scores, kind="stable")]
    lexical = [i for i in lexical if lexical_scores[i] > 0] or lexical
    semantic = [int(i) for i in np.argsort(-(vectors @ query), kind="stable")]
    return [("bm25", lexical), ("dense", semantic), ("hybrid", rrf(lexical, semantic))]


def summary(rows: list[Row]) -> dict[str, float]:
    lit = [r[0] for r in rows if not r[4]]
    para = [r[0] for r in rows if r[4]]
    return {
        "recall": round(statistics.mean(r[0] for r in rows), 3),
        "lit": round(statistics.mean(lit), 3) if lit else float("nan"),
        "para": round(statistics.mean(para), 3) if para else float("nan"),
        "precision": round(statistics.mean(r[1] for r in rows), 3),
        "tokens": round(statistics.mean(r[2] for r in rows), 1),
        "returned": round(statistics.mean(r[3] for r in rows), 1),
    }


def _row(task: Any, chosen: Sequence[Candidate], used: int) -> Row:
    found = sum(1 for lab in task.labels if any(matches(c, lab) for c in chosen))
    useful = sum(1 for c in chosen if any(matches(c, lab) for lab in task.labels))
    precision = useful / len(chosen) if chosen else 0.0
    return (found / len(task.labels), precision, used, len(chosen), task.paraphrased)


def _score_answer(task: Any, answer: Any, root: Path) -> Row:
    chosen = [
        Candidate(
            uid=d.directive_id,
            rule_id=d.rule_id,
            file=_relative(d.source_path, root),
            line_start=d.line_start,
            line_end=d.line_end,
            text=d.text,
        )
        for d in answer.directives
    ]
    return _row(task, chosen, answer.diagnostics.tokens_used)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    sets = args.sets.split(",") if args.sets else ds.set_names()
    by_set: dict[str, list[Any]] = defaultdict(list)
    for task in ds.load_tasks():
        if task.set in sets:
            by_set[task.set].append(task)
    budget = args.budget
    captured: dict[str, Any] = {}
    real_rank = service_module.rank_candidates

    def capture_rank(candidates: Any, params: Any = None) -> Any:
        captured["candidates"] = list(candidates)
        return real_rank(candidates, params)

    service_module.rank_candidates = capture_rank  # type: ignore[assignment]
    shipped = service_module._RANK
    data: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    methods: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    curve: dict[str, list[Row]] = defaultdict(list)
    answers: dict[str, list[list[Any]]] = {}  # memoir:shipped's, for --answers
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/tune.db",
            settings=load_settings(cwd=Path(tmp), environ={}),
            embedder=create_embedder("local"),
        )
        try:
            await memoir.embedder.ensure_loaded()
            install_embed_text(memoir, args.embed_text)
            count = memoir.tokens.count
            services: dict[str, tuple[RulesService, Path]] = {}
            for set_name in sorted(by_set):
                root = (ds.PUBLIC / set_name).resolve()
                service = RulesService(memoir.context, cwd=root)
                services[set_name] = (service, root)
                await service.upsert_markdown(
                    [str(root)], scope=set_name, allowed_roots=[str(root)]
                )
                index = await service._index(Scope.of(set_name))
                base = service._settings
                pool = await run_dev._candidates(service, set_name, root)
                bm25 = BM25([tokens(" ".join((c.text, *c.section))) for c in pool])
                vectors = await run_dev._dense_vectors(memoir, pool)
                for task in by_set[set_name]:
                    service_module._RANK = BEFORE
                    service._settings = base.model_copy(update={"candidate_k": 30})
                    answer = await service.query_directives(
                        task.task, scope=set_name, token_budget=budget
                    )
                    methods["memoir:before"][set_name].append(_score_answer(task, answer, root))
                    service._settings = base.model_copy(update={"candidate_k": args.candidate_k})
                    await service.query_directives(task.task, scope=set_name, token_budget=budget)
                    kept, _ = real_rank(captured["candidates"], BEFORE)
                    by_id = {c.item_id: c for c in captured["candidates"]}
                    candidates = [by_id[item_id] for _, item_id in kept]
                    labels = []
                    for c in candidates:
                        d = index.directives[c.item_id]
                        cand = Candidate(
                            d.uid, d.rule_id, _relative(d.uri, root), d.line_start, d.line_end, ""
                        )
                        labels.append(float(any(matches(cand, lab) for lab in task.labels)))
                    data[set_name].append((features(candidates, args.fusion_k), np.array(labels)))
                    # The ceiling: labels some candidate (after the gate) matches at all.
                    hit = [
                        Candidate(
                            "",
                            "",
                            _relative(index.directives[c.item_id].uri, root),
                            index.directives[c.item_id].line_start,
                            index.directives[c.item_id].line_end,
                            "",
                        )
                        for c in candidates
                    ]
                    found = sum(1 for lab in task.labels if any(matches(h, lab) for h in hit))
                    methods["candidates (ceiling)"][set_name].append(
                        (found / len(task.labels), 0.0, 0, len(hit), task.paraphrased)
                    )
                    query = await memoir.embedder.embed_query(task.task)
                    for method, order in baseline_orders(task.task, query, bm25, vectors):
                        chosen, used, _ = pack(order, pool, budget, count)
                        methods[method][set_name].append(_row(task, chosen, used))
                print(f"{set_name}: {len(by_set[set_name])} tasks replayed", file=sys.stderr)

            def stacked(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
                rows = [pair for n in names for pair in data[n]]
                return np.vstack([x for x, _ in rows]), np.concatenate([y for _, y in rows])

            folds: dict[str, RankParams] = {}
            for set_name in sorted(by_set):
                others = [n for n in by_set if n != set_name]
                folds[set_name] = fit(*stacked(others), l2=args.l2, k=args.fusion_k)
                service, root = services[set_name]
                service._settings = service._settings.model_copy(
                    update={"candidate_k": args.candidate_k}
                )
                for method, params in (
                    ("memoir:after", folds[set_name]),
                    ("memoir:shipped", shipped),
                ):
                    service_module._RANK = params
                    for task in by_set[set_name]:
                        answer = await service.query_directives(
                            task.task, scope=set_name, token_budget=budget
                        )
                        methods[method][set_name].append(_score_answer(task, answer, root))
                        if method == "memoir:shipped":
                            answers[task.id] = [
                                [_relative(d.source_path, root), d.line_start, d.text]
                                for d in answer.directives
                            ]
                if args.curve:
                    # Precision against recall: the held-out weights, cut shorter.
                    for n in CURVE_ITEMS:
                        service_module._RANK = folds[set_name]
                        for task in by_set[set_name]:
                            answer = await service.query_directives(
                                task.task, scope=set_name, token_budget=budget, max_items=n
                            )
                            curve[f"max_items={n}"].append(_score_answer(task, answer, root))
                    for floor, ratio in CURVE_GATES:
                        gate = RelevanceGate(floor=floor, ratio=ratio, keep_at_least=1)
                        service_module._RANK = dataclasses.replace(folds[set_name], gate=gate)
                        for task in by_set[set_name]:
                            answer = await service.query_directives(
                                task.task, scope=set_name, token_budget=budget
                            )
                            curve[f"floor={floor} ratio={ratio}"].append(
                                _score_answer(task, answer, root)
                            )
            every = fit(*stacked(sorted(by_set)), l2=args.l2, k=args.fusion_k)
        finally:
            service_module._RANK = shipped
            service_module.rank_candidates = real_rank  # type: ignore[assignment]
            await memoir.close()
    order = [
        "memoir:before",
        "memoir:after",
        "hybrid",
        "bm25",
        "dense",
        "memoir:shipped",
        "candidates (ceiling)",
    ]
    print("\n| held-out set | " + " | ".join(order) + " |")
    print("|" + " --- |" * (len(order) + 1))
    for set_name in sorted(by_set):
        cells = [f"{summary(methods[m][set_name])['recall']:.3f}" for m in order]
        print(f"| {set_name} | " + " | ".join(cells) + " |")
    overall = {m: summary([r for rs in methods[m].values() for r in rs]) for m in order}
    print(
        "\n| method | recall | lit | para | precision | tokens | returned |\n"
        "| --- | --- | --- | --- | --- | --- | --- |"
    )
    for m in order:
        s = overall[m]
        print(
            f"| {m} | {s['recall']:.3f} | {s['lit']:.3f} | {s['para']:.3f} | "
            f"{s['precision']:.3f} | {s['tokens']:.0f} | "
            f"{s['returned']:.1f} |"
        )

    if curve:
        print("\n| cut (held-out weights) | recall | lit | para | precision | tokens | returned |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, rows in curve.items():
            s = summary(rows)
            print(
                f"| {name} | {s['recall']:.3f} | {s['lit']:.3f} | {s['para']:.3f} | "
                f"{s['precision']:.3f} | {s['tokens']:.0f} | "
                f"{s['returned']:.1f} |"
            )

    def show(params: RankParams) -> str:
        fields = dataclasses.asdict(params)
        fields.pop("gate")
        return ", ".join(f"{k}={v:g}" for k, v in fields.items())

    print("\nweights per held-out fold (fitted on the other sets):")
    for set_name, params in folds.items():
        print(f"  {set_name}: {show(params)}")
    print(f"fitted on every set (RankParams defaults): {show(every)}")
    print(f"shipped defaults: {show(shipped)}")
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return {
        "budget": budget,
        "candidate_k": args.candidate_k,
        "overall": overall,
        "per_set": {m: {n: summary(rs) for n, rs in methods[m].items()} for m in order},
        "folds": {n: show(p) for n, p in folds.items()},
        "fit_all": show(every),
        "embed_text": args.embed_text,
        "curve": {name: summary(rows) for name, rows in curve.items()},
        "answers": answers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=900)
    parser.add_argument("--sets", default=None)
    parser.add_argument("--candidate-k", type=int, default=60, help="rules.candidate_k after")
    parser.add_argument("--fusion-k", type=float, default=10.0)
    parser.add_argument("--l2", type=float, default=0.1)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--curve", action="store_true", help="recall/precision of shorter cuts")
    parser.add_argument(
        "--answers", type=Path, default=None, help="write memoir:shipped's directives per task here"
    )
    parser.add_argument(
        "--embed-text", choices=sorted(EMBED_TEXTS), default="shipped", help="what is embedded"
    )
    parser.add_argument(
        "--split-identifiers",
        action="store_true",
        help="query expansion: search camelCase identifiers' parts too (lexical arm)",
    )
    args = parser.parse_args()
    if args.split_identifiers:
        candidates_module.tokenize = split_identifiers  # type: ignore[assignment]
    out = anyio.run(_run, args)
    answers = out.pop("answers")
    if args.answers:
        args.answers.write_text(json.dumps(answers, indent=1), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
