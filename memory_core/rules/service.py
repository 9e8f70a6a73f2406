"""``RulesService``: the rules knowledge graph behind the CLI and the MCP tools.

Upsert (Requirement 7) parses rule files, plans graph writes and embeds new directives, then
writes documents atomically, in batches. Detection (Requirements 2, 6) and ranking
(Requirements 3, 4, 5) read an in-memory index of the scope's directives that is rebuilt only
when the graph version changes, so a query costs a few FTS5 statements (overlapped with the
embedding and one matrix product over the in-memory vectors), some dictionary work, and one
small insert recording the run (written in the background).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, overload

import anyio
import structlog

from memory_core.errors import (
    ConfigError,
    EmptyKnowledgeGraphError,
    InvalidInputError,
    NotFoundError,
)
from memory_core.input_limits import check_path_lengths
from memory_core.models import utc_now
from memory_core.rules import persistence
from memory_core.rules.candidates import graph_candidates, search_arms
from memory_core.rules.context_block import pack_directives, render_header
from memory_core.rules.detection import (
    DetectionCache,
    detect_context,
    validate_task,
)
from memory_core.rules.dictionaries import build_dictionaries
from memory_core.rules.graph import rule_key
from memory_core.rules.index import DirectiveIndex, IndexedDirective, build_index
from memory_core.rules.ingest import ingest_loaded, read_rule_files
from memory_core.rules.log_safety import sanitize_for_log
from memory_core.rules.models import (
    DetectedContext,
    DirectiveDetail,
    DirectiveQueryResult,
    QueryDiagnostics,
    QueryRun,
    RankedDirective,
    RemoveReport,
    RetrievalStats,
    RuleDetail,
    RuleSummary,
    ScoreBreakdown,
    UpsertReport,
)
from memory_core.rules.paths import escaping_links, validate_virtual_path
from memory_core.rules.relevance import short_reason
from memory_core.rules.rerank import RankParams, rank_columns
from memory_core.rules.runs import RunRecorder, query_run_payload
from memory_core.rules.scoring import (
    MODE_TOPICS,
    QueryFeatures,
    content_stems,
    resolve_weights,
    score_directive,
    weight_vector,
)
from memory_core.rules.signal_columns import candidate_signals
from memory_core.rules.topics import expand_topics
from memory_core.scope import Scope, ScopeLike, as_scope, find_project_root
from memory_core.storage.ports import Tx

__all__ = ["RulesService"]

# The ranking stage's weights and gate: task relevance fused with the rank fusion of the
# relevance, similarity and lexical rankings, plus severity (memory_core/rules/rerank.py).
_RANK = RankParams()


class _OnDemand(Sequence[RankedDirective]):
    """The ranked directives, each built the first time it is read (then kept)."""

    def __init__(
        self, ranked: list[tuple[float, int]], build: Callable[[float, int], RankedDirective]
    ) -> None:
        self._ranked = ranked
        self._build = build
        self._built: dict[int, RankedDirective] = {}

    def __len__(self) -> int:
        return len(self._ranked)

    @overload
    def __getitem__(self, position: int) -> RankedDirective: ...

    @overload
    def __getitem__(self, position: slice) -> list[RankedDirective]: ...

    def __getitem__(self, position: int | slice) -> RankedDirective | list[RankedDirective]:
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        if position < 0:
            position += len(self._ranked)
        entry = self._built.get(position)
        if entry is None:
            score, item_id = self._ranked[position]  # IndexError ends iteration
            entry = self._built[position] = self._build(score, item_id)
        return entry


def _met_condition(breakdown: ScoreBreakdown, conditions: Sequence[str]) -> str | None:
    if breakdown.when_to_apply <= 0:
        return None
    for reason in breakdown.reasons:
        if reason.startswith("when to apply: "):
            return reason[len("when to apply: ") :].rsplit(" (", 1)[0].strip("'\"")
    return conditions[0] if conditions else None


_RULE_PORTS = frozenset(("items", "lexical", "vectors", "resources", "graph", "log"))


def _log() -> Any:
    # A fresh lazy proxy per call: a module-level one is frozen by cache_logger_on_first_use,
    # and entry points (or tests capturing logs) may configure structlog after import.
    return structlog.get_logger(__name__)


class RulesService:
    """Rules knowledge graph: upsert, detect context, rank directives within a budget.

    Args:
        ctx: the facade's :class:`~memory_core.service.CoreContext` (settings, store,
            embedder, token counter).
        cwd: the working directory for relative paths and the default allowed root.
    """

    def __init__(self, ctx: Any, *, cwd: Path | None = None) -> None:
        self._ctx = ctx
        self._settings = ctx.settings.rules
        self._cwd = cwd or Path.cwd()
        self._indexes: dict[Scope, DirectiveIndex] = {}
        self._index_locks: dict[Scope, anyio.Lock] = {}
        self._detections = DetectionCache(ttl_s=self._settings.detection_cache_ttl_s)
        self._run_recorder: RunRecorder | None = None

    def _require_ports(self) -> None:
        """Rules need the item, lexical, vector, resource, graph and log ports; a backend
        without them (MySQL holds only the category hierarchy) says so instead of failing late."""
        store = self._ctx.store
        missing = sorted(_RULE_PORTS - set(store.capabilities))
        if missing:
            raise ConfigError(
                f"rules (upsert, query, detect, list, show, remove) need a store with the "
                f"{', '.join(missing)} ports; {store.url.redacted()} is a {store.backend} store "
                "without them",
                hint="keep rules in a SQLite or PostgreSQL store: pass --db "
                "sqlite:///path/to/memoir.db (or postgresql://…) to `memoir rules …`",
                details={"backend": store.backend, "unsupported": "rules", "missing": missing},
            )

    @property
    def _runs(self) -> RunRecorder:
        # Made on first use: constructing the service must not touch the store.
        if self._run_recorder is None:
            self._run_recorder = RunRecorder(self._ctx.store)
        return self._run_recorder

    @property
    def detection_cache(self) -> DetectionCache:
        """The detection cache (exposed for diagnostics and tests)."""
        return self._detections

    # -- upsert ------------------------------------------------------------------------------

    def _roots(self, allowed_roots: Sequence[str] | None) -> list[Path]:
        if allowed_roots:
            return [self._absolute(r) for r in allowed_roots]
        roots = [self._absolute(r) for r in self._settings.allowed_roots]
        roots.append(find_project_root(self._cwd))
        return roots

    def _absolute(self, path: str) -> Path:
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() else self._cwd / candidate

    async def upsert_markdown(
        self,
        paths: Sequence[str],
        *,
        scope: ScopeLike,
        overwrite: bool = False,
        allowed_roots: Sequence[str] | None = None,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        named_by_user: bool = False,
    ) -> UpsertReport:
        """Ingest rule files (or folders, walked for every supported format).

        Each document is validated, planned, embedded and written atomically (documents are
        batched into transactions of a few hundred directives); a bad document (unreadable,
        outside the allowed roots, unparsable) is reported and the others continue
        (Requirements 7.5, 7.6).

        Args:
            paths: files or folders.
            scope: the scope to write to.
            overwrite: replace rules of the same name from other documents (else merge).
            allowed_roots: folders paths must resolve into (default: ``rules.allowed_roots``
                and the project root of the working directory).
            include: glob patterns (relative to a walked folder) of files to take whatever
                they are (``docs/**/*.md``).
            exclude: glob patterns of files to leave out of a folder walk.
            named_by_user: the paths come from the person at the shell (the CLI): each is
                theirs to read, so it is its own allowed root. Paths an agent sends over MCP
                keep the allowed-roots restriction.

        Returns:
            Statistics (Requirement 7.4), warnings and per-document outcomes.

        Raises:
            InvalidInputError: no path was given.
            LimitExceededError: a path longer than ``limits.path_chars``.
        """
        scope = as_scope(scope)
        self._require_ports()
        if not paths:
            raise InvalidInputError(
                "no rule document paths given", hint="pass one or more files or folders"
            )
        check_path_lengths(paths, self._ctx.settings.limits.path_chars)
        started = time.perf_counter()
        roots = self._roots(allowed_roots)
        cwd = self._cwd
        if named_by_user:
            for raw in paths:
                named = self._absolute(raw).resolve()
                roots.append(named if named.is_dir() else named.parent)
        loaded = await anyio.to_thread.run_sync(
            lambda: read_rule_files(paths, roots, cwd=cwd, include=include, exclude=exclude)
        )
        report = await ingest_loaded(
            self._ctx, loaded, scope=scope, overwrite=overwrite, started=started
        )
        # The folder walk skips links that escape; say so rather than skip them silently.
        report.warnings.extend(
            await anyio.to_thread.run_sync(lambda: escaping_links(paths, roots, cwd=cwd))
        )
        await self._refresh_after_write(scope, report)
        return report

    async def upsert_text(
        self, text: str, *, path: str, scope: ScopeLike, overwrite: bool = False
    ) -> UpsertReport:
        """Ingest raw markdown content (the MCP case: the client sends the text).

        Args:
            text: the document.
            path: the path to record (relative, no ``..``); also drives format detection.
            scope: the scope to write to.
            overwrite: replace rules of the same name from other documents (else merge).

        Raises:
            InvalidInputError: empty text or an invalid path.
            PathNotAllowedError: an absolute path or one with ``..``.
        """
        scope = as_scope(scope)
        self._require_ports()
        from rules_parser import parse

        started = time.perf_counter()
        shown = validate_virtual_path(path)
        if not text or not text.strip():
            raise InvalidInputError(
                f"the rule document {shown!r} is empty", hint="send the markdown content"
            )
        result = parse(text, shown)
        report = await ingest_loaded(
            self._ctx, [(shown, result)], scope=scope, overwrite=overwrite, started=started
        )
        await self._refresh_after_write(scope, report)
        return report

    async def _refresh_after_write(self, scope: Scope, report: UpsertReport | None) -> None:
        # Rebuild the ranker's index now, on the write path, so the next query does not pay
        # for it (seconds at 100k directives). Skipped when nothing changed.
        if report is None or any(d.status in ("created", "updated") for d in report.documents):
            await self._index(scope)

    # -- index -------------------------------------------------------------------------------

    async def _index(self, scope: Scope) -> DirectiveIndex:
        store = self._ctx.store
        version = await store.read(lambda tx: persistence.graph_version(tx, scope))
        cached = self._indexes.get(scope)
        if cached is not None and cached.version == version:
            return cached
        lock = self._index_locks.setdefault(scope, anyio.Lock())
        async with lock:
            cached = self._indexes.get(scope)
            if cached is not None and cached.version == version:
                return cached

            max_vectors = self._settings.memory_vectors_max

            def load(tx: Tx) -> tuple[int, Any, Any, Any, Any]:
                rows = persistence.load_directive_rows(tx, scope)
                vectors = (
                    persistence.load_directive_vectors(tx, scope)
                    if len(rows) <= max_vectors
                    else None
                )
                return (
                    persistence.graph_version(tx, scope),
                    rows,
                    persistence.load_rules(tx, scope),
                    persistence.learned_terms(tx, scope),
                    vectors,
                )

            current, rows, rules, (topics, techs), vectors = await store.read(load)

            def build() -> DirectiveIndex:
                index = build_index(current, rows, rules)
                index.dictionaries = build_dictionaries(
                    self._settings, learned_topics=topics, learned_technologies=techs
                )
                if vectors is not None:
                    index.attach_vectors(*vectors)
                return index

            index = await anyio.to_thread.run_sync(build)
            self._indexes[scope] = index
            return index

    # -- detection ---------------------------------------------------------------------------

    async def _detect(
        self, task: str, index: DirectiveIndex, scope: Scope, return_keywords: bool
    ) -> DetectedContext:
        key = (scope, index.version, task, return_keywords)
        cached = self._detections.get(key)
        if cached is not None:
            return cached
        assert index.dictionaries is not None
        detected = detect_context(task, index.dictionaries, return_keywords=return_keywords)
        self._detections.put(key, detected)
        return detected

    async def detect_context(
        self, task: str, *, scope: ScopeLike, return_keywords: bool = False
    ) -> DetectedContext:
        """Detect the layer, topics and technologies of a task (Requirements 2 and 6).

        Works on an empty graph too (built-in dictionaries); the graph's own topics and
        technologies are learned once rules are ingested. Results are cached (5 min).

        Args:
            task: the task description.
            scope: whose learned dictionaries to use.
            return_keywords: also return action words and domain terms.

        Raises:
            InvalidInputError: the task is empty or too long.
        """
        scope = as_scope(scope)
        self._require_ports()
        started = time.perf_counter()
        text = validate_task(task, max_chars=self._settings.max_task_chars)
        index = await self._index(scope)
        detected = await self._detect(text, index, scope, return_keywords)
        _log().debug(
            "context detected",
            task=sanitize_for_log(text),
            layer=detected.detected_layer,
            topics=detected.topics[:6],
            confidence=detected.confidence,
            took_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        return detected

    # -- query ---------------------------------------------------------------------------------

    async def query_directives(
        self,
        task: str,
        *,
        scope: ScopeLike,
        token_budget: int | None = None,
        max_items: int | None = None,
        strict_layer: bool = False,
        mode_slug: str | None = None,
        include_breadcrumbs: bool = False,
    ) -> DirectiveQueryResult:
        """The directives that matter for a task, ranked, explained, within a token budget.

        Args:
            task: the task description.
            scope: the scope to read.
            token_budget: tokens for the context block (default ``rules.token_budget``, 900).
            max_items: the most directives to return (default ``rules.max_items``).
            strict_layer: drop directives of other layers (wildcard ``*`` ones stay).
            mode_slug: the agent's mode (architect, code, debug, test, ask, review) to shift
                weights per ``[rules.modes]``.
            include_breadcrumbs: add source path, lines and section under each directive.

        Returns:
            The context block, the ranked directives with score breakdowns, citations and
            diagnostics.

        Raises:
            InvalidInputError: empty task, or a non-positive budget / max_items.
            EmptyKnowledgeGraphError: no rules in this scope yet (Requirement 11.1).
        """
        scope = as_scope(scope)
        self._require_ports()
        started = time.perf_counter()
        started_at = utc_now()
        text = validate_task(task, max_chars=self._settings.max_task_chars)
        budget = self._settings.token_budget if token_budget is None else int(token_budget)
        limit = self._settings.max_items if max_items is None else int(max_items)
        if budget < 1 or limit < 1:
            raise InvalidInputError(
                f"token_budget ({budget}) and max_items ({limit}) must be at least 1",
                hint="omit them for the defaults (900 tokens, "
                f"{self._settings.max_items} directives)",
            )
        index = await self._index(scope)
        if index.size == 0:
            raise EmptyKnowledgeGraphError()
        detected = await self._detect(text, index, scope, False)
        warnings = list(detected.warnings)
        weights, mode_warning = resolve_weights(
            mode_slug, configured=self._settings.weights, configured_modes=self._settings.modes
        )
        if mode_warning:
            warnings.append(mode_warning)
        mode_key = mode_slug.strip().casefold() if mode_slug else None

        fine_topics = list(detected.topics) + list(MODE_TOPICS.get(mode_key or "", ()))
        query_topics = expand_topics(fine_topics)
        features = QueryFeatures(
            layer=detected.detected_layer,
            layer_confidence={c.layer: c.confidence for c in detected.layer_candidates},
            topics=query_topics,
            task_stems=content_stems(text),
        )

        arms = await search_arms(
            self._ctx.store,
            index,
            text,
            scope,
            self._ctx.embedder,
            lambda: graph_candidates(
                index, query_topics, features, limit=self._settings.graph_limit
            ),
            warnings,
            k=self._settings.candidate_k,
            wait_s=self._settings.embedder_wait_s,
        )
        lexical_ids, nearest_ids, graph_ids = arms.lexical, arms.nearest, arms.graph
        semantic, semantic_ok = arms.similarity, arms.semantic_ok

        candidate_ids = set(lexical_ids) | set(nearest_ids) | graph_ids
        candidate_ids &= index.directives.keys()
        if strict_layer:
            if detected.detected_layer is None:
                warnings.append("strict_layer ignored: no layer was detected")
            else:
                candidate_ids = {
                    i
                    for i in candidate_ids
                    if index.directives[i].layer in ("*", detected.detected_layer)
                }
        no_rule = frozenset[str]()
        # Signals, relevance and total of every candidate on numpy columns: the same values
        # to the bit as signal_values / relevance / total_of one candidate at a time.
        signals = candidate_signals(
            index,
            candidate_ids,
            semantic=semantic if semantic_ok else None,
            lexical_rank={item_id: rank for rank, item_id in enumerate(lexical_ids)},
            lexical_size=len(lexical_ids),
            query=features,
            weights=weight_vector(weights),
        )
        # The budget is a ceiling: only candidates relevant to the task are ranked.
        scored, below_relevance = rank_columns(
            signals.ids,
            signals.total,
            signals.relevance,
            signals.similarity,
            signals.lexical_rank,
            signals.must,
            _RANK,
        )
        row_of = {item_id: row for row, item_id in enumerate(signals.ids.tolist())}
        lexical_set, nearest_set = set(lexical_ids), set(nearest_ids)
        seen_statements: set[frozenset[str]] = set()
        restated = 0
        shown: list[tuple[float, int]] = []
        for score, item_id in scored:
            if len(shown) >= limit:
                break
            # AGENTS.md and CLAUDE.md often say the same thing: one line is enough.
            statement_key = index.restatement_key(item_id)
            if statement_key and statement_key in seen_statements:
                restated += 1
                continue
            seen_statements.add(statement_key)
            shown.append((score, item_id))

        def explain(score: float, item_id: int) -> RankedDirective:
            directive = index.directives[item_id]
            rule = index.rules.get(directive.rule_id)
            breakdown = score_directive(
                severity=directive.severity,
                layer=directive.layer,
                topics=directive.topic_set,
                conditions=directive.condition_terms,
                condition_texts=directive.conditions,
                rule_authoritative_for=rule.authoritative_for if rule else no_rule,
                semantic=semantic.get(item_id) if semantic_ok else None,
                query=features,
                weights=weights,
                relevance=float(signals.relevance[row_of[item_id]]),
                total=score,
                values=signals.values(row_of[item_id]),
            )
            reason = short_reason(
                shared_words=(
                    w for w, s in index.statement_words(item_id) if s in features.task_stems
                ),
                condition=_met_condition(breakdown, directive.conditions),
                authority_topics=(rule.authoritative_for if rule else no_rule) & features.topics,
                topics=directive.topic_set & features.topics,
                semantic=semantic.get(item_id) if semantic_ok else None,
            )
            return self._ranked(
                index, item_id, breakdown, lexical_set, nearest_set, graph_ids, reason
            )

        # Explanations are built only for what packing looks at (about the first 20 of
        # ``limit``): each is a score breakdown, a reason and two pydantic models.
        ranked = _OnDemand(shown, explain)
        packed = pack_directives(
            ranked,
            header=render_header(detected),
            budget=budget,
            safety_cap=max(self._settings.must_safety_cap, 1),
            count=self._ctx.tokens.count,
            include_breadcrumbs=include_breadcrumbs,
            left_out=below_relevance + len(scored) - len(shown) - restated,
        )
        took = round((time.perf_counter() - started) * 1000, 3)
        diagnostics = QueryDiagnostics(
            detected_layer=detected.detected_layer,
            layer_candidates=detected.layer_candidates,
            topics=detected.topics,
            languages=detected.languages,
            frameworks=detected.frameworks,
            platforms=detected.platforms,
            confidence=detected.confidence,
            retrieval_stats=RetrievalStats(
                searched=index.size,
                considered=len(candidate_ids),
                selected=len(packed.selected),
                lexical_hits=len(lexical_ids),
                semantic_hits=len(nearest_ids),
                graph_hits=len(graph_ids),
                dropped_for_budget=packed.dropped_for_budget + max(0, len(scored) - limit),
                below_relevance=below_relevance,
            ),
            token_budget=budget,
            tokens_used=packed.tokens_used,
            token_counter=self._ctx.settings.tokenizer,
            forced_must=packed.forced_must,
            mode=mode_key,
            weights=weights,
            semantic_available=semantic_ok,
            execution_ms=took,
            warnings=warnings,
        )
        # Requirement 12.2: sanitized task, context, candidates, top-5 scores, time.
        _log().info(
            "directives queried",
            scope=scope.key,
            task=sanitize_for_log(text),
            layer=detected.detected_layer,
            topics=detected.topics[:6],
            confidence=detected.confidence,
            candidates=len(candidate_ids),
            top_scores=[round(s[0], 2) for s in scored[:5]],
            selected=len(packed.selected),
            tokens=packed.tokens_used,
            took_ms=took,
        )
        result = DirectiveQueryResult(
            context_block=packed.context_block,
            directives=packed.selected,
            citations=packed.citations,
            diagnostics=diagnostics,
        )
        # DESIGN §6: every query records its run, built after the answer is complete and
        # written in the background: the answer does not wait for the writer thread.
        payload = query_run_payload(
            text,
            result,
            top_scores=[(index.directives[s[1]].uid, s[0]) for s in scored[:5]],
            max_items=limit,
            strict_layer=strict_layer,
            include_breadcrumbs=include_breadcrumbs,
        )
        await self._runs.record(scope, started_at, took, payload)
        return result

    async def close(self) -> None:
        """Write the query runs still queued (the facade calls this before closing the store)."""
        if self._run_recorder is not None:
            await self._run_recorder.close()

    async def list_query_runs(self, *, scope: ScopeLike, limit: int = 20) -> list[QueryRun]:
        """The newest recorded ``query_directives`` runs of a scope, newest first.

        Args:
            scope: the scope whose runs to list.
            limit: the most runs to return (1..1000).

        Raises:
            InvalidInputError: ``limit`` is below 1.
        """
        scope = as_scope(scope)
        self._require_ports()
        if limit < 1:
            raise InvalidInputError(
                f"limit must be at least 1 (got {limit})", hint="pass --limit 1 or more"
            )
        return await self._runs.list(scope, min(int(limit), 1000))

    @staticmethod
    def _ranked(
        index: DirectiveIndex,
        item_id: int,
        breakdown: ScoreBreakdown,
        lexical: set[int],
        semantic: set[int],
        graph: set[int],
        reason: str = "",
    ) -> RankedDirective:
        directive: IndexedDirective = index.directives[item_id]
        rule = index.rules.get(directive.rule_id)
        matched: list[Any] = []
        if item_id in lexical:
            matched.append("lexical")
        if item_id in semantic:
            matched.append("semantic")
        if item_id in graph:
            matched.append("graph")
        return RankedDirective(
            directive_id=directive.uid,
            rule_id=directive.rule_id,
            rule_title=rule.title if rule else None,
            text=directive.statement,
            severity=directive.severity,  # type: ignore[arg-type]
            polarity=directive.polarity,  # type: ignore[arg-type]
            layer=directive.layer or None,
            topics=list(directive.topics),
            source_path=directive.uri,
            line_start=directive.line_start,
            line_end=directive.line_end,
            section=list(directive.section),
            score=breakdown.total,
            breakdown=breakdown,
            matched_by=matched,
            reason=reason,
        )

    # -- browsing ------------------------------------------------------------------------------

    async def list_rules(self, *, scope: ScopeLike) -> list[RuleSummary]:
        """Every rule of the scope with its sources and directive count."""
        scope = as_scope(scope)
        self._require_ports()
        index = await self._index(scope)
        return [self._summary(index, rule_id) for rule_id in sorted(index.rules)]

    @staticmethod
    def _summary(index: DirectiveIndex, rule_id: str) -> RuleSummary:
        rule = index.rules[rule_id]
        return RuleSummary(
            rule_id=rule.rule_id,
            name=rule.name,
            title=rule.title,
            layer=rule.layer,
            topics=list(rule.topics),
            authoritative_for=sorted(rule.authoritative_for),
            sources=list(rule.sources),
            directive_count=len(index.by_rule.get(rule_id, ())),
        )

    async def get_rule(self, rule_id: str, *, scope: ScopeLike) -> RuleDetail:
        """One rule with every directive.

        Raises:
            NotFoundError: no such rule in the scope (the hint lists some that exist).
        """
        scope = as_scope(scope)
        self._require_ports()
        index = await self._index(scope)
        key = rule_id if rule_id in index.rules else rule_key(rule_id)
        if key not in index.rules:
            raise NotFoundError(
                f"no rule {rule_id!r} in scope {scope.key!r}",
                hint="known rules: " + ", ".join(sorted(index.rules)[:20])
                if index.rules
                else "ingest rules with `memoir rules upsert <path>`",
            )
        rows = await self._ctx.store.read(
            lambda tx: persistence.rule_directive_rows(tx, scope, key)
        )
        rule = index.rules[key]
        return RuleDetail(
            summary=self._summary(index, key),
            when_to_apply=list(rule.conditions),
            related_rules=list(rule.related),
            directives=[
                DirectiveDetail(
                    directive_id=r.uid,
                    text=str(r.metadata.get("statement", "")),
                    severity=r.metadata.get("severity", "SHOULD"),
                    polarity=r.metadata.get("polarity", "do"),
                    section=list(r.metadata.get("section_path") or []),
                    source_path=r.uri,
                    line_start=r.start_line,
                    line_end=r.end_line,
                    rationale=r.metadata.get("rationale"),
                    topics=list(r.metadata.get("topics") or []),
                    layer=r.metadata.get("layer"),
                    when_to_apply=list(r.metadata.get("when_to_apply") or []),
                    examples=list(r.metadata.get("examples") or []),
                    anti_patterns=list(r.metadata.get("anti_patterns") or []),
                    token_count=r.token_count,
                )
                for r in rows
            ],
        )

    async def remove_rule(self, rule_id_or_path: str, *, scope: ScopeLike) -> RemoveReport:
        """Remove a rule (every document defining it) or one document by its path.

        Raises:
            NotFoundError: neither a rule id nor a stored document path.
        """
        scope = as_scope(scope)
        self._require_ports()
        value = rule_id_or_path.strip()

        def remove(tx: Tx) -> tuple[list[str], int, int]:
            rules, docs, directives = persistence.delete_rule_sources(tx, scope, None, value)
            if not docs:
                rules, docs, directives = persistence.delete_rule_sources(
                    tx, scope, rule_key(value), None
                )
            return rules, docs, directives

        rules, docs, directives = await self._ctx.store.write(remove)
        if docs:
            await self._refresh_after_write(scope, None)
        if not docs:
            raise NotFoundError(
                f"no rule or rule document {value!r} in scope {scope.key!r}",
                hint="list them with `memoir rules list`",
            )
        _log().info(
            "rules removed", scope=scope.key, rules=rules, documents=docs, directives=directives
        )
        return RemoveReport(rule_ids=rules, documents_removed=docs, directives_removed=directives)
