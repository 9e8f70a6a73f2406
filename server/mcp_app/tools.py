"""The MCP tools: thin adapters over the memoir facade.

Canonical names: ``query_directives``, ``detect_context``, ``upsert_markdown`` (rules),
``ingest``, ``query`` (knowledge). The spec's ``memory.rules.*`` spellings are not registered:
dots are not valid in tool names for several clients, and one name per tool keeps the list small.
``list_rules``, ``search`` and ``forget_knowledge`` are extra tools behind ``server.extra_tools``.

A tool body validates, resolves the scope, calls the facade, and shapes the result; nothing else.
Descriptions are written for the model that calls them.
"""

# No `from __future__ import annotations`: the SDK reads these signatures at registration.

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp_types import CallToolResult, ListRootsResult, ToolAnnotations
from pydantic import Field

from memory_core.errors import InvalidInputError, MemoirError
from memory_core.hierarchy.limits import check_ingest_size
from memory_core.input_limits import check_path_lengths, os_error_as_input_error
from memory_core.service import Memoir
from server.logging_setup import sanitize
from server.mcp_app import engines, shaping
from server.mcp_app.auth import grant_for
from server.mcp_app.boundary import finish_result
from server.mcp_app.calls import (
    RootsCache,
    client_key,
    client_roots,
    error_result,
    ok_result,
    root_uris,
    scope_for,
)
from server.mcp_app.jobs import JOBS_URI, IngestJob, IngestJobs, register_jobs_resource
from server.mcp_app.notify import announce_rules_changed
from server.mcp_app.runtime import MemoirRuntime, refuse_unwritable
from server.mcp_app.schemas import (
    DetectContextOutput,
    IngestOutput,
    QueryDirectivesOutput,
    QueryOutput,
    UpsertOutput,
)
from server.mcp_app.scoping import ScopeDecision, require_write_scope
from server.mcp_app.upsert_checks import raise_if_nothing_loaded, readable_base

__all__ = ["DEFAULT_TOOLS", "EXTRA_TOOLS", "MEMORY_TOOLS", "register_tools"]

log = structlog.get_logger(__name__)

# The agent-memory tools live in server.mcp_app.memory_tools (issue 11).
MEMORY_TOOLS = ("remember", "recall", "forget", "pin", "memory_mode")
DEFAULT_TOOLS = (
    "query_directives",
    "detect_context",
    "upsert_markdown",
    "ingest",
    "query",
    *MEMORY_TOOLS,
)
EXTRA_TOOLS = ("list_rules", "search", "forget_knowledge")

_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_UPSERT = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
_INGEST = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

Roots = Annotated[ListRootsResult | None, Resolve(client_roots)]
Task = Annotated[str, Field(description="The coding task, in plain words.")]

_QUERY_DIRECTIVES = """\
Call at the START of every coding task: returns the project rules for the task as a ranked \
markdown context_block (MUST = non-negotiable) with citations and diagnostics. Prepend \
context_block to your context. Example: {"task": "add a login form"}"""

_DETECT_CONTEXT = """\
Detect a task's layer, topics and technologies with a confidence (warns below 0.6); shows what \
query_directives assumes. Example: {"task": "add a SQL migration"}"""

_UPSERT_MARKDOWN = """\
Load rule documents (memoir template, AGENTS.md, CLAUDE.md, .cursor/rules, .clinerules…) into \
the project's rules; paths (files or folders) relative to the project root. Merges unless \
overwrite. Reports counts and per-document errors with lines. \
Example: {"paths": ["docs/rules/security.md"]}"""

_INGEST_DOC = """\
Save decisions, facts and notes to project memory, filed in a category tree (yours if you pass \
category, broadest first). Example: {"text": "We deploy on Fridays", "category": "Ops / Deploys"}"""

_QUERY_DOC = """\
Answer a question from knowledge saved with ingest, citing sources (rules: query_directives). \
Example: {"question": "how do we deploy?"}"""


class ToolHost:
    """Runs tool bodies with the shared bookkeeping: scope, rate limit, timeout, error edge."""

    def __init__(self, runtime: MemoirRuntime) -> None:
        self.runtime = runtime

    def scope(self, roots: ListRootsResult | None, ctx: Context) -> ScopeDecision:
        cache = getattr(ctx.mcp_server, "roots_cache", None)
        if isinstance(cache, RootsCache):
            cache.remember(ctx, roots)
        return scope_for(root_uris(roots), self.runtime.scope_defaults, grant=grant_for(ctx))

    async def run(
        self,
        ctx: Context,
        tool: str,
        body: Callable[[Any], Awaitable[CallToolResult]],
        *,
        writes: bool,
        decision: ScopeDecision | None = None,
        on_timeout: Callable[[Any, float], Awaitable[CallToolResult]] | None = None,
        timeout: float | None = None,
    ) -> CallToolResult:
        started = time.perf_counter()
        timeout = timeout or self.runtime.settings.server.call_timeout_s
        health = None
        try:
            async with self.runtime.call(tool, client_key(ctx)):
                memoir = await self.runtime.memoir()
                health = await self.runtime.store_health(memoir)
                if writes:
                    refuse_unwritable(health)
                    # Writes are never cut short: a cancelled write would leave the caller
                    # unsure whether it landed. They run to completion, then answer.
                    result = await body(memoir)
                else:
                    try:
                        with anyio.fail_after(timeout):
                            result = await body(memoir)
                    except TimeoutError:
                        if on_timeout is None:
                            raise MemoirError(
                                f"{tool} timed out after {timeout:g} s",
                                hint="retry with a narrower request, or raise "
                                "server.call_timeout_s (MEMOIR_SERVER__CALL_TIMEOUT_S)",
                            ) from None
                        result = await on_timeout(memoir, (time.perf_counter() - started) * 1000)
        except MemoirError as error:
            return finish_result(error_result(error, tool=tool), decision, health)
        except OSError as exc:  # a path the file system refused (name too long, …)
            return finish_result(
                error_result(os_error_as_input_error(exc), tool=tool), decision, health
            )
        log.info(
            "tool call",
            tool=tool,
            took_ms=round((time.perf_counter() - started) * 1000, 1),
            is_error=bool(result.is_error),
        )
        return finish_result(result, decision, health)


def register_tools(app: MCPServer, runtime: MemoirRuntime, *, extra: bool = False) -> None:
    """Register the default tools (and the extra ones when ``extra``) on ``app``."""
    host = ToolHost(runtime)
    settings = runtime.settings
    jobs = IngestJobs()

    @app.tool(
        name="query_directives",
        title="Project rules for a task",
        description=_QUERY_DIRECTIVES,
        annotations=_READ,
    )
    async def query_directives(
        task: Task,
        ctx: Context,
        roots: Roots,
        token_budget: Annotated[
            int | None, Field(ge=50, le=8000, description="Max tokens (default 900).")
        ] = None,
        max_items: Annotated[int | None, Field(ge=1, le=100)] = None,
        strict_layer: Annotated[bool, Field(description="Only the detected layer.")] = False,
        mode_slug: str | None = None,
        include_breadcrumbs: Annotated[bool, Field(description="Add source sections.")] = False,
    ) -> Annotated[CallToolResult, QueryDirectivesOutput]:
        decision = host.scope(roots, ctx)
        log.info("query_directives", task=sanitize(task), scope_source=decision.source)

        async def body(memoir: Memoir) -> CallToolResult:
            # The core itself warns when the embedding model is still loading (lexical ranking).
            result = await memoir.rules.query_directives(
                task,
                scope=decision.read_scope,
                token_budget=token_budget,
                max_items=max_items,
                strict_layer=strict_layer,
                mode_slug=mode_slug,
                include_breadcrumbs=include_breadcrumbs,
            )
            out = shaping.directives_output(result, extra_warnings=_scope_warnings(decision))
            return ok_result(out, shaping.directives_text(out))

        async def partial(memoir: Memoir, elapsed_ms: float) -> CallToolResult:
            detected = await memoir.rules.detect_context(task, scope=decision.read_scope)
            out = shaping.partial_directives_output(
                detected,
                timeout_s=settings.server.call_timeout_s,
                token_budget=token_budget or settings.rules.token_budget,
                execution_ms=round(elapsed_ms, 1),
            )
            return ok_result(out, shaping.directives_text(out))

        return await host.run(
            ctx, "query_directives", body, writes=False, decision=decision, on_timeout=partial
        )

    @app.tool(
        name="detect_context",
        title="Detect a task's layer and topics",
        description=_DETECT_CONTEXT,
        annotations=_READ,
    )
    async def detect_context(
        task: Task,
        ctx: Context,
        roots: Roots,
        return_keywords: Annotated[bool, Field(description="Also return keywords.")] = False,
    ) -> Annotated[CallToolResult, DetectContextOutput]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            detected = await memoir.rules.detect_context(
                task, scope=decision.read_scope, return_keywords=return_keywords
            )
            out = shaping.detect_output(detected)
            return ok_result(out, shaping.detect_text(out))

        return await host.run(ctx, "detect_context", body, writes=False, decision=decision)

    @app.tool(
        name="upsert_markdown",
        title="Load rule documents",
        description=_UPSERT_MARKDOWN,
        annotations=_UPSERT,
    )
    async def upsert_markdown(
        paths: Annotated[list[str], Field(min_length=1, max_length=500)],
        ctx: Context,
        roots: Roots,
        overwrite: bool = False,
        text: Annotated[
            str | None,
            Field(
                description="Markdown of one document named paths[0], if the server can't read it."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, UpsertOutput]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            scope = require_write_scope(decision)
            check_path_lengths(paths, settings.limits.path_chars)
            if text is not None:
                if len(paths) != 1:
                    raise InvalidInputError(
                        f"text was given with {len(paths)} paths",
                        hint="pass exactly one path (the document's name) together with text",
                    )
                report = await memoir.rules.upsert_text(
                    text, path=paths[0], scope=scope, overwrite=overwrite
                )
            else:
                base = readable_base(decision)
                allowed = [*(str(f) for f in decision.readable), *settings.rules.allowed_roots]
                resolved = [str(_resolve_path(p, base)) for p in paths]
                report = await memoir.rules.upsert_markdown(
                    resolved, scope=scope, overwrite=overwrite, allowed_roots=allowed
                )
            raise_if_nothing_loaded(report)
            out = shaping.upsert_output(report)
            await announce_rules_changed(ctx, [d.rule_id for d in report.documents if d.rule_id])
            return ok_result(out, shaping.upsert_text(out))

        return await host.run(ctx, "upsert_markdown", body, writes=True, decision=decision)

    @app.tool(name="ingest", title="Save knowledge", description=_INGEST_DOC, annotations=_INGEST)
    async def ingest(
        text: Annotated[str, Field(min_length=1)],
        ctx: Context,
        roots: Roots,
        source: str | None = None,
        category: str | None = None,
    ) -> Annotated[CallToolResult, IngestOutput]:
        decision = host.scope(roots, ctx)

        async def progress(done: Any) -> None:  # a no-op unless the client sent progressToken
            await ctx.report_progress(
                done.bytes_done,
                done.bytes_total,
                f"{done.chunks_done} chunks in {done.batches_done} batches",
            )

        async def body(memoir: Memoir) -> CallToolResult:
            scope = require_write_scope(decision)
            model = engines.sampling_model(ctx, settings)
            if len(text.encode("utf-8")) > settings.hierarchy.background_ingest_bytes:
                check_ingest_size(len(text.encode("utf-8")), settings.hierarchy.max_ingest_bytes)
                job = jobs.start(
                    lambda job: _ingest_job(memoir, job, text, scope, source, category)
                )
                note = (
                    f"ingest runs in the background as job {job.job_id}: read "
                    f"{JOBS_URI}{job.job_id} for its progress and result"
                )
                out = IngestOutput(engine="hierarchy", stored=0, categories=[], warnings=[note])
                return ok_result(out, note)
            result = await memoir.hierarchy.ingest_text(
                text,
                scope=scope,
                source=source,
                model=model,
                category=category,
                progress=progress,
            )
            _raise_if_failed(result, f"{len(result.chunks)} chunk(s) were stored before it")
            out = shaping.ingest_output_from_hierarchy(result)
            return ok_result(out, shaping.ingest_text(out))

        return await host.run(ctx, "ingest", body, writes=True, decision=decision)

    @app.tool(name="query", title="Ask saved knowledge", description=_QUERY_DOC, annotations=_READ)
    async def query(
        question: Annotated[str, Field(min_length=1)],
        ctx: Context,
        roots: Roots,
        max_token_budget: Annotated[int | None, Field(ge=50, le=32000)] = None,
        strategy: Literal["one_shot", "wide_branch", "zoom_in", "branch_out"] | None = None,
    ) -> Annotated[CallToolResult, QueryOutput]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            result = await memoir.hierarchy.query(
                question,
                scope=decision.read_scope,
                strategy=strategy,
                max_token_budget=max_token_budget,
                model=engines.sampling_model(ctx, settings),
            )
            _raise_if_failed(result, "no answer was produced")
            out = shaping.query_output_from_hierarchy(result)
            out.warnings.extend(_scope_warnings(decision))
            return ok_result(out, shaping.query_text(out))

        # A query may wait on LLM calls (MCP sampling, a provider): allow at least one LLM
        # timeout on top of the call timeout.
        llm_bound = settings.server.call_timeout_s + settings.llm.timeout_s
        return await host.run(
            ctx, "query", body, writes=False, decision=decision, timeout=llm_bound
        )

    from server.mcp_app.memory_tools import register_memory_tools

    register_jobs_resource(app, jobs)

    register_memory_tools(app, runtime)
    if extra:
        _register_extra_tools(app, host)


def _register_extra_tools(app: MCPServer, host: ToolHost) -> None:
    from server.mcp_app.extra_tools import register_extra_tools

    register_extra_tools(app, host)
    if host.runtime.settings.server.layer_file:  # issue 12: the memory layer's tools
        from server.mcp_app.layer_tools import LayerHost, register_layer_tools

        register_layer_tools(app, host, LayerHost(host.runtime.settings))


async def _ingest_job(
    memoir: Memoir, job: IngestJob, text: str, scope: str, source: str | None, category: str | None
) -> dict[str, Any]:
    """A background ingest: progress into ``job``, then the tool's output as its result."""

    async def progress(done: Any) -> None:
        job.progress = done.as_dict()

    result = await memoir.hierarchy.ingest_text(
        text, scope=scope, source=source, category=category, progress=progress
    )
    _raise_if_failed(result, "run the ingest again: it resumes after the last stored batch")
    out = shaping.ingest_output_from_hierarchy(result).model_dump()
    if result.stream is not None:
        out["stream"] = result.stream.model_dump()
    return dict(out)


def _raise_if_failed(result: Any, consequence: str) -> None:
    """The hierarchy reports model failures as ``status="error"`` results: a tool error."""
    if result.status == "error" and result.error is not None:
        raise MemoirError(
            f"{result.error.message} ({consequence})",
            hint=result.error.hint,
            details={"code": result.error.code},
        )


def _resolve_path(raw: str, base: Path) -> Path:
    path = Path(raw).expanduser()
    return path if path.is_absolute() else base / path


def _scope_warnings(decision: ScopeDecision) -> list[str]:
    if decision.scope is None:
        return [
            "no project scope (no MCP roots, no workspace): read the global scope; start the "
            "server with --workspace to use a project's rules"
        ]
    return []
