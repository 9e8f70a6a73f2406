"""The dense side of ``query_directives`` on the public dev set: a second vector per directive
and a section arm, each measured leave one repository out against today in the same run.

Variants (``--variants``, default all), each installed by wrapping the candidate search
(``memory_core.rules.candidates.search_arms`` as the service calls it) so the rest of the
query path, the ranking stage and the packer are memoir's own:

- ``today``: the shipped query path (the same-run baseline);
- ``max`` / ``max-union``: a second vector per directive ("nearest heading. statement"); the
  similarity every candidate carries (relevance and the similarity ranking) is the larger of
  its two cosines; the semantic arm's nearest are the top ``candidate_k`` by that maximum
  (``max``) or today's nearest plus the top ``candidate_k`` by the second vector
  (``max-union``);
- ``mix-A``: as ``max-union`` but the similarity is A × first + (1 − A) × second;
- ``section-S``: one vector per rule-file section (its heading path and its directives'
  statements); the directives of the S sections nearest the task join the candidates
  (at most ``--section-cap`` of them);
- ``feat2``: the second cosine as two more ranking features (its fused rank and its value),
  fitted with the others; the similarity stays the first cosine;
- ``near-N``: the semantic arm widened to N (first vector);
- ``prf-N`` / ``prfl-N``: pseudo-relevance feedback, the query vector plus half the mean of its
  N nearest directives' vectors (``prfl``: the lexical arm's top N), nearest re-searched;
- ``centre``: similarity = cosine minus the query's median cosine over the scope, plus 0.3;
- combinations joined by ``+`` (``max-union+section-5``).

``--diagnose`` prints where each label ends up (returned, ranked below the budget, cut by the
relevance gate, never a candidate with its best rank by each cosine, or not parsed).
Results and what was kept: ``RESULTS.md``, section "the dense side" (nothing was adopted).

Protocol per variant (one store, one folder upsert per set, real local embedder, budget 900,
``candidate_k`` 60): every task is asked once to record the candidates the ranking stage sees
(features and label matches, as ``tune_rank.py`` does) and the candidate ceiling; then per
held-out set the ranking weights are fitted (class-balanced logistic, ``tune_rank.fit``) on
the other eight sets' candidates *of the same variant* and the held-out tasks are asked
through the real ``query_directives`` with them. ``--sample`` also runs ``run_eval.py``'s
``sample_rules`` measurement under each variant (shipped weights).

Run: ``nice -n 10 .venv/bin/python bench/rules_eval/tune_dense.py [--variants a,b] [--sample]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_dev  # noqa: E402  (sets up sys.path for the repository)
import run_eval  # noqa: E402
import tune_rank  # noqa: E402
from run_dev import BM25, Candidate, _relative, ds, matches, pack, tokens  # noqa: E402

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.rules import service as service_module  # noqa: E402
from memory_core.rules.index import DirectiveIndex  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

_SECTION_CHARS = 1200


@dataclass(frozen=True)
class Variant:
    name: str
    second: str | None = None  # None, "max", "max-union", "mix"
    mix: float = 0.5
    sections: int = 0
    section_cap: int = 30
    nearest: int = 0  # widen the semantic arm to this many (0: candidate_k)
    feature2: bool = False  # the second cosine as its own fitted ranking feature
    prf: int = 0  # pseudo-relevance feedback: add the mean of this many top vectors to the query
    prf_source: str = "dense"  # "dense" (nearest by cosine) or "lexical" (the lexical arm's top)
    centre: bool = False  # similarity minus the query's median cosine over the scope, + 0.3

    @classmethod
    def parse(cls, name: str, section_cap: int) -> Variant:
        second, mix, sections, nearest, feature2 = None, 0.5, 0, 0, False
        prf, prf_source, centre = 0, "dense", False
        for part in name.split("+"):
            if part == "today":
                continue
            if part == "feat2":
                feature2 = True
            elif part == "centre":
                centre = True
            elif part.startswith("prf-"):
                prf = int(part[4:])
            elif part.startswith("prfl-"):
                prf, prf_source = int(part[5:]), "lexical"
            elif part.startswith("near-"):
                nearest = int(part[5:])
            elif part in ("max", "max-union"):
                second = part
            elif part.startswith("mix-"):
                second, mix = "mix", float(part[4:])
            elif part.startswith("section-"):
                sections = int(part[8:])
            else:
                raise SystemExit(f"unknown variant part {part!r}")
        return cls(
            name, second, mix, sections, section_cap, nearest, feature2, prf, prf_source, centre
        )


def heading_statement(statement: str, section: Sequence[str]) -> str:
    """ "nearest heading. statement", the nearest heading as ``graph._heading`` finds it."""
    path = tuple(section)
    text = statement.casefold().strip()
    if path and text and text in path[-1].casefold():
        path = path[:-1]
    heading = path[-1] if len(path) > 1 else ""
    return f"{heading}. {statement}" if heading else statement


def section_of(uri: str, statement: str, section: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    path = tuple(section)
    if path and statement.casefold().strip() in path[-1].casefold():
        path = path[:-1]
    return uri, path


@dataclass
class Extras:
    second: np.ndarray  # rows as index.vector_ids
    section_vectors: np.ndarray
    section_members: list[list[int]]


_EXTRAS: dict[int, tuple[DirectiveIndex, Extras]] = {}
_CURRENT: list[Variant] = [Variant("today")]
# The second cosine of the last query's candidates (item id -> similarity), for ``feat2``.
_SECOND: dict[int, float] = {}
# Extra ranking weights of ``feat2`` (points per fused rank of the second cosine, per cosine).
_EXTRA_WEIGHTS: list[tuple[float, float]] = [(0.0, 0.0)]
_LAST_QUERY: list[Any] = [None]


def points_params(points: np.ndarray, k: float) -> Any:
    """The first six fitted coefficients (``tune_rank.FEATURES``) as RankParams."""
    return tune_rank.RankParams(
        relevance_weight=float(points[1]),
        fusion_relevance=float(points[2]),
        fusion_semantic=float(points[3]),
        fusion_lexical=float(points[4]),
        fusion_k=k,
        must_bonus=float(points[5]),
    )


def diagnose(
    task: Any,
    index: DirectiveIndex,
    root: Path,
    cands: Sequence[Any],
    answer: Any,
    captured: dict[str, Any],
) -> list[dict[str, Any]]:
    """Per label: returned, or its place in the ranked candidates, or (never a candidate) the
    best rank of a directive matching it by each cosine over the whole scope."""
    query = _LAST_QUERY[0]
    extras = _EXTRAS[id(index)][1]
    assert index.vector_ids is not None and index.vectors is not None
    ids = [int(i) for i in index.vector_ids.tolist()]
    rank1 = {ids[r]: n for n, r in enumerate(np.argsort(-(index.vectors @ query), kind="stable"))}
    rank2 = {ids[r]: n for n, r in enumerate(np.argsort(-(extras.second @ query), kind="stable"))}
    order = captured.get("order", [])
    place = {item_id: n for n, item_id in enumerate(order)}
    cand_ids = {c.item_id for c in cands}
    pre_gate = {c.item_id for c in captured["candidates"]}
    shown = {d.directive_id for d in answer.directives}
    out = []
    for lab in task.labels:
        hits = [
            d
            for d in index.directives.values()
            if matches(
                Candidate(d.uid, d.rule_id, _relative(d.uri, root), d.line_start, d.line_end, ""),
                lab,
            )
        ]
        row: dict[str, Any] = {"task": task.id, "paraphrased": task.paraphrased}
        if not hits:
            row["state"] = "parse"
        elif any(d.uid in shown for d in hits):
            row["state"] = "returned"
        elif any(d.item_id in pre_gate for d in hits) and not any(
            d.item_id in cand_ids for d in hits
        ):
            row["state"] = "gated"
        elif any(d.item_id in cand_ids for d in hits):
            row["state"] = "ranked"
            row["place"] = min(place.get(d.item_id, 10**6) for d in hits)
        else:
            row["state"] = "never"
            row["cos1"] = min(rank1.get(d.item_id, 10**6) for d in hits)
            row["cos2"] = min(rank2.get(d.item_id, 10**6) for d in hits)
            row["scope"] = len(ids)
        out.append(row)
    return out


def print_misses(name: str, misses: Sequence[dict[str, Any]]) -> None:
    from collections import Counter

    states = Counter(m["state"] for m in misses)
    print(f"{name}: labels {len(misses)}: {dict(states)}", file=sys.stderr)
    ranked = [m["place"] for m in misses if m["state"] == "ranked"]
    bands = ((0, 30), (30, 45), (45, 60), (60, 10**7))
    print(
        "  ranked but not returned, place in the order: "
        + ", ".join(f"{a + 1}-{b}: {sum(a <= p < b for p in ranked)}" for a, b in bands),
        file=sys.stderr,
    )
    never = [m for m in misses if m["state"] == "never"]
    cos_bands = ((0, 60), (60, 120), (120, 240), (240, 10**7))
    for key in ("cos1", "cos2"):
        print(
            f"  never a candidate, best {key} rank in scope: "
            + ", ".join(
                f"{a + 1}-{b}: {sum(a <= m[key] < b for m in never)}" for a, b in cos_bands
            ),
            file=sys.stderr,
        )
    print(
        f"  never a candidate: {[(m['task'], m['cos1'], m['cos2'], m['scope']) for m in never]}",
        file=sys.stderr,
    )


_REAL_SEARCH = service_module.search_arms


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)


async def extras_for(index: DirectiveIndex, embedder: Any) -> Extras:
    held = _EXTRAS.get(id(index))
    if held is not None and held[0] is index:
        return held[1]
    assert index.vector_ids is not None
    ids = [int(i) for i in index.vector_ids.tolist()]
    texts = [
        heading_statement(index.directives[i].statement, index.directives[i].section) for i in ids
    ]
    second = _normalised(await embedder.embed_documents(texts))
    groups: dict[tuple[str, tuple[str, ...]], list[int]] = defaultdict(list)
    for i in ids:
        d = index.directives[i]
        groups[section_of(d.uri, d.statement, d.section)].append(i)
    keys = sorted(groups)
    section_texts = []
    for key in keys:
        heading = " > ".join(key[1]) or Path(key[0]).name
        body = " ".join(index.directives[i].statement for i in groups[key])
        section_texts.append(f"{heading}. {body}"[:_SECTION_CHARS])
    section_vectors = _normalised(await embedder.embed_documents(section_texts))
    extras = Extras(second, section_vectors, [groups[k] for k in keys])
    _EXTRAS[id(index)] = (index, extras)
    return extras


async def search_arms(
    store: Any,
    index: DirectiveIndex,
    text: str,
    scope: Scope,
    embedder: Any,
    expand: Any,
    warnings: list[str],
    *,
    k: int,
    wait_s: float = 0.0,
) -> Any:
    arms = await _REAL_SEARCH(
        store, index, text, scope, embedder, expand, warnings, k=k, wait_s=wait_s
    )
    variant = _CURRENT[0]
    _LAST_QUERY[0] = arms.query_vec
    _SECOND.clear()
    changes = (
        variant.second
        or variant.sections
        or variant.nearest
        or variant.feature2
        or variant.prf
        or variant.centre
    )
    if not changes or arms.query_vec is None:
        return arms
    assert index.vectors is not None and index.vector_ids is not None
    extras = await extras_for(index, embedder)
    ids = index.vector_ids
    query = arms.query_vec.astype(np.float32)
    first = index.vectors @ query
    if variant.prf:
        if variant.prf_source == "lexical":
            rows = [index.vector_row[i] for i in arms.lexical if i in index.vector_row]
            rows = rows[: variant.prf]
        else:
            rows = np.argsort(-first, kind="stable")[: variant.prf].tolist()
        if rows:
            feedback = index.vectors[rows].mean(0)
            query = query + 0.5 * feedback / (np.linalg.norm(feedback) or 1.0)
            query = (query / np.linalg.norm(query)).astype(np.float32)
            first = index.vectors @ query
            top = np.argsort(-first, kind="stable")[:k]
            arms.nearest = [int(ids[r]) for r in top]
    if variant.centre:
        first = first - float(np.median(first)) + 0.3
    sims = first
    if variant.nearest:
        rows = np.argsort(-first, kind="stable")[: variant.nearest]
        seen = set(arms.nearest)
        arms.nearest = arms.nearest + [int(ids[r]) for r in rows if int(ids[r]) not in seen]
    if variant.second is not None:
        second = extras.second @ query
        sims = variant.mix * first + (1 - variant.mix) * second
        if variant.second != "mix":
            sims = np.maximum(first, second)
        top = min(k, len(sims))
        if variant.second == "max":
            rows = np.argsort(-sims, kind="stable")[:top]
            arms.nearest = [int(ids[r]) for r in rows]
        else:
            rows = np.argsort(-second, kind="stable")[:top]
            seen = set(arms.nearest)
            arms.nearest = arms.nearest + [int(ids[r]) for r in rows if int(ids[r]) not in seen]
    if variant.sections:
        section_sims = extras.section_vectors @ query
        joined: list[int] = []
        for s in np.argsort(-section_sims, kind="stable")[: variant.sections]:
            joined += extras.section_members[int(s)]
        arms.graph = set(arms.graph) | set(joined[: variant.section_cap])
    second_all = extras.second @ query if variant.feature2 else None
    for item_id in {*arms.nearest, *arms.lexical, *arms.graph}:
        row = index.vector_row.get(item_id)
        if row is not None:
            arms.similarity[item_id] = float(sims[row])
            if second_all is not None:
                _SECOND[item_id] = float(second_all[row])
    return arms


def second_features(candidates: Sequence[Any], k: float) -> np.ndarray:
    """(fused rank of the second cosine, the second cosine) per candidate (``feat2``)."""
    values = np.array([_SECOND.get(c.item_id, 0.0) for c in candidates])
    item_ids = np.array([c.item_id for c in candidates])
    order = np.lexsort((item_ids, -values))
    fused = np.zeros(len(candidates))
    fused[order] = k / (k + np.arange(len(candidates)))
    return np.column_stack([fused, values])


def fit_points(x: np.ndarray, y: np.ndarray, *, l2: float = 0.1) -> np.ndarray:
    """``tune_rank.fit``'s logistic regression, every coefficient in seed-003 points."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    balance = np.where(y > 0, (len(y) - y.sum()) / max(y.sum(), 1.0), 1.0)
    for _ in range(600):
        p = 1 / (1 + np.exp(-z @ w))
        w -= 0.5 * (z.T @ ((p - y) * balance) / len(y) + l2 * np.r_[w[:-1], 0.0])
    raw = w[:-1] / sd
    return (raw / raw[0]).round(1)


def rank_with_second(real_rank: Any, k: float) -> Any:
    """``rank_candidates`` plus the ``feat2`` terms, same gate, same tie-breaks."""

    def rank(candidates: Any, params: Any = None) -> Any:
        scored, left_out = real_rank(candidates, params)
        fused_w, sim_w = _EXTRA_WEIGHTS[0]
        if not scored or not _SECOND or not (fused_w or sim_w):
            return scored, left_out
        by_id = {c.item_id: c for c in candidates}
        kept = [by_id[item_id] for _, item_id in scored]
        extra = second_features(kept, k) @ np.array([fused_w, sim_w])
        rescored = [
            (round(score + float(e), 4), item_id)
            for (score, item_id), e in zip(scored, extra, strict=True)
        ]
        rescored.sort(key=lambda p: (-p[0], -by_id[p[1]].semantic, p[1]))
        return rescored, left_out

    return rank


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    variants = [Variant.parse(v, args.section_cap) for v in args.variants.split(",")]
    sets = args.sets.split(",") if args.sets else ds.set_names()
    by_set: dict[str, list[Any]] = defaultdict(list)
    for task in ds.load_tasks():
        if task.set in sets:
            by_set[task.set].append(task)
    budget = args.budget
    captured: dict[str, Any] = {}
    real_rank = service_module.rank_candidates

    ranker = rank_with_second(real_rank, args.fusion_k)

    def capture_rank(candidates: Any, params: Any = None) -> Any:
        captured["candidates"] = list(candidates)
        captured["second"] = dict(_SECOND)
        result = ranker(candidates, params)
        captured["order"] = [item_id for _, item_id in result[0]]
        return result

    service_module.rank_candidates = capture_rank  # type: ignore[assignment]
    service_module.search_arms = search_arms  # type: ignore[assignment]
    shipped = service_module._RANK
    results: dict[str, Any] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/tune.db",
            settings=load_settings(cwd=Path(tmp), environ={}),
            embedder=create_embedder("local"),
        )
        try:
            await memoir.embedder.ensure_loaded()
            count = memoir.tokens.count
            services: dict[str, tuple[RulesService, Path]] = {}
            baselines: dict[str, list[tune_rank.Row]] = defaultdict(list)
            sizes = {"directives": 0, "sections": 0}
            for set_name in sorted(by_set):
                root = (ds.PUBLIC / set_name).resolve()
                service = RulesService(memoir.context, cwd=root)
                services[set_name] = (service, root)
                await service.upsert_markdown(
                    [str(root)], scope=set_name, allowed_roots=[str(root)]
                )
                service._settings = service._settings.model_copy(
                    update={"candidate_k": args.candidate_k}
                )
                index = await service._index(Scope.of(set_name))
                extras = await extras_for(index, memoir.embedder)
                sizes["directives"] += len(index.directives)
                sizes["sections"] += len(extras.section_members)
                pool = await run_dev._candidates(service, set_name, root)
                bm25 = BM25([tokens(" ".join((c.text, *c.section))) for c in pool])
                vectors = await run_dev._dense_vectors(memoir, pool)
                for task in by_set[set_name]:
                    query = await memoir.embedder.embed_query(task.task)
                    for method, order in tune_rank.baseline_orders(task.task, query, bm25, vectors):
                        chosen, used, _ = pack(order, pool, budget, count)
                        baselines[method].append(tune_rank._row(task, chosen, used))
                print(f"{set_name}: ingested", file=sys.stderr)
            for method, rows in baselines.items():
                results[method] = {"ALL": tune_rank.summary(rows)}
            for variant in variants:
                _CURRENT[0] = variant
                _EXTRA_WEIGHTS[0] = (0.0, 0.0)
                service_module._RANK = shipped
                misses: list[dict[str, Any]] = []
                data: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
                rows: dict[str, dict[str, list[tune_rank.Row]]] = defaultdict(
                    lambda: defaultdict(list)
                )
                n_candidates = []
                for set_name in sorted(by_set):
                    service, root = services[set_name]
                    index = await service._index(Scope.of(set_name))
                    for task in by_set[set_name]:
                        answer = await service.query_directives(
                            task.task, scope=set_name, token_budget=budget
                        )
                        rows["shipped weights"][set_name].append(
                            tune_rank._score_answer(task, answer, root)
                        )
                        kept, _ = real_rank(captured["candidates"], tune_rank.BEFORE)
                        by_id = {c.item_id: c for c in captured["candidates"]}
                        cands = [by_id[item_id] for _, item_id in kept]
                        n_candidates.append(len(captured["candidates"]))
                        hits = []
                        for c in cands:
                            d = index.directives[c.item_id]
                            hits.append(
                                Candidate(
                                    d.uid,
                                    d.rule_id,
                                    _relative(d.uri, root),
                                    d.line_start,
                                    d.line_end,
                                    "",
                                )
                            )
                        labels = [float(any(matches(h, lab) for lab in task.labels)) for h in hits]
                        x = tune_rank.features(cands, args.fusion_k)
                        if variant.feature2:
                            _SECOND.clear()
                            _SECOND.update(captured["second"])
                            x = np.hstack([x, second_features(cands, args.fusion_k)])
                        data[set_name].append((x, np.array(labels)))
                        if args.diagnose:
                            misses += diagnose(task, index, root, cands, answer, captured)
                        found = sum(1 for lab in task.labels if any(matches(h, lab) for h in hits))
                        rows["ceiling"][set_name].append(
                            (found / len(task.labels), 0.0, 0, len(hits), task.paraphrased)
                        )

                def stacked(
                    names: Sequence[str], data: Any = data
                ) -> tuple[np.ndarray, np.ndarray]:
                    pairs = [pair for n in names for pair in data[n]]
                    return np.vstack([x for x, _ in pairs]), np.concatenate([y for _, y in pairs])

                for set_name in sorted(by_set):
                    others = [n for n in by_set if n != set_name]
                    x, y = stacked(others)
                    service_module._RANK = tune_rank.fit(x[:, :6], y, l2=args.l2, k=args.fusion_k)
                    if variant.feature2:
                        points = fit_points(x, y, l2=args.l2)
                        service_module._RANK = points_params(points, args.fusion_k)
                        _EXTRA_WEIGHTS[0] = (float(points[6]), float(points[7]))
                    service, root = services[set_name]
                    for task in by_set[set_name]:
                        answer = await service.query_directives(
                            task.task, scope=set_name, token_budget=budget
                        )
                        rows["loo"][set_name].append(tune_rank._score_answer(task, answer, root))
                x, y = stacked(sorted(by_set))
                every = fit_points(x, y, l2=args.l2).tolist()
                service_module._RANK = shipped
                _EXTRA_WEIGHTS[0] = (0.0, 0.0)
                out: dict[str, Any] = {
                    m: {
                        "ALL": tune_rank.summary([r for rs in per.values() for r in rs]),
                        **{n: tune_rank.summary(rs)["recall"] for n, rs in per.items()},
                    }
                    for m, per in rows.items()
                }
                out["candidates_mean"] = round(float(np.mean(n_candidates)), 1)
                out["fit_all"] = every
                if args.diagnose:
                    out["misses"] = misses
                    print_misses(variant.name, misses)
                if args.sample:
                    if variant.feature2:  # what would ship: the fit on every set
                        service_module._RANK = points_params(np.array(every), args.fusion_k)
                        _EXTRA_WEIGHTS[0] = (every[6], every[7])
                    sample = await run_eval._evaluate(
                        HERE / "sample_tasks.json", budget, False, "local"
                    )
                    out["sample_rules"] = sample["recall"]["memoir"]
                    service_module._RANK = shipped
                    _EXTRA_WEIGHTS[0] = (0.0, 0.0)
                results[variant.name] = out
                s = out["loo"]["ALL"]
                print(
                    f"{variant.name}: loo {s['recall']:.3f} (lit {s['lit']:.3f} para "
                    f"{s['para']:.3f}) precision {s['precision']:.3f} | shipped weights "
                    f"{out['shipped weights']['ALL']['recall']:.3f} | ceiling "
                    f"{out['ceiling']['ALL']['recall']:.3f} | candidates "
                    f"{out['candidates_mean']} | sample_rules {out.get('sample_rules')} "
                    f"({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            service_module._RANK = shipped
            service_module.rank_candidates = real_rank  # type: ignore[assignment]
            service_module.search_arms = _REAL_SEARCH  # type: ignore[assignment]
            await memoir.close()
    results["sizes"] = sizes
    return results


def _print(results: dict[str, Any], variants: Sequence[str]) -> None:
    sets = sorted(k for k in results[variants[0]]["loo"] if k != "ALL")
    print(
        "\n| variant | LOO recall | lit | para | precision | tokens | returned | "
        "shipped weights | ceiling | candidates | sample_rules |"
    )
    print("|" + " --- |" * 11)
    for name in variants:
        r = results[name]
        s = r["loo"]["ALL"]
        print(
            f"| {name} | {s['recall']:.3f} | {s['lit']:.3f} | {s['para']:.3f} | "
            f"{s['precision']:.3f} | {s['tokens']:.0f} | {s['returned']:.1f} | "
            f"{r['shipped weights']['ALL']['recall']:.3f} | {r['ceiling']['ALL']['recall']:.3f} "
            f"| {r['candidates_mean']} | {r.get('sample_rules', '—')} |"
        )
    for method in ("hybrid", "dense", "bm25"):
        s = results[method]["ALL"]
        print(
            f"| *{method}* | {s['recall']:.3f} | {s['lit']:.3f} | {s['para']:.3f} | "
            f"{s['precision']:.3f} | {s['tokens']:.0f} | {s['returned']:.1f} | | | | |"
        )
    print("\n| variant (LOO recall per held-out set) | " + " | ".join(sets) + " |")
    print("|" + " --- |" * (len(sets) + 1))
    for name in variants:
        print(f"| {name} | " + " | ".join(f"{results[name]['loo'][n]:.3f}" for n in sets) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=900)
    parser.add_argument("--sets", default=None)
    parser.add_argument(
        "--variants",
        default="today,max,max-union,mix-0.5,section-3,section-6,max-union+section-6",
    )
    parser.add_argument("--candidate-k", type=int, default=60)
    parser.add_argument("--section-cap", type=int, default=30)
    parser.add_argument("--fusion-k", type=float, default=10.0)
    parser.add_argument("--l2", type=float, default=0.1)
    parser.add_argument("--sample", action="store_true", help="sample_rules under each variant")
    parser.add_argument("--diagnose", action="store_true", help="where the missed labels rank")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = anyio.run(_run, args)
    _print(results, args.variants.split(","))
    print(f"sizes: {results['sizes']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
