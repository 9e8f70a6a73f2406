"""Resources: the store summary, and each rule of the caller's project as ``memoir://rules/…``.

``resources/list`` shows the rules of the scope the client's roots name (bounded); the templates
``memoir://rules/{rule_id}`` (the rule with every directive, as markdown) and
``memoir://rules/{rule_id}/{directive_id}`` read them; ``memoir://categories`` is the tree of
saved knowledge. Nothing here writes.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import Resource as MCPResource

from memory_core.errors import MemoirError, NotFoundError
from memory_core.redaction import redact_text
from memory_core.rules.models import RuleDetail
from server.mcp_app.auth import grant_for
from server.mcp_app.calls import roots_for_request, scope_for
from server.mcp_app.notify import CATEGORIES_URI, STORE_SUMMARY_URI, rule_uri
from server.mcp_app.runtime import MemoirRuntime

__all__ = ["categories_markdown", "list_rule_resources", "register_resources", "rule_markdown"]

log = structlog.get_logger(__name__)

_MAX_LISTED_RULES = 200
_MARKDOWN = "text/markdown"


def rule_markdown(detail: Any) -> str:
    """A stored rule (``RuleDetail``) as a markdown document."""
    summary = detail.summary
    lines = [f"# {summary.title or summary.name}", ""]
    meta = [
        ("Rule", summary.rule_id),
        ("Layer", summary.layer or "-"),
        ("Topics", ", ".join(summary.topics) or "-"),
        ("AuthoritativeFor", ", ".join(summary.authoritative_for) or "-"),
        ("Sources", ", ".join(summary.sources) or "-"),
    ]
    lines += [f"- **{k}**: {v}" for k, v in meta]
    if detail.when_to_apply:
        lines += ["", "## When to Apply", *(f"- {c}" for c in detail.when_to_apply)]
    lines += ["", "## Directives"]
    for d in detail.directives:
        where = f"{d.source_path}:{d.line_start}" if d.line_start else d.source_path
        lines.append(f"- [{d.marker}] {d.text} ({where}; id {d.directive_id})")
        if d.rationale:
            lines.append(f"  - Rationale: {d.rationale}")
    if detail.related_rules:
        lines += ["", "## Related", *(f"- {r}" for r in detail.related_rules)]
    return "\n".join(lines) + "\n"


def directive_markdown(detail: Any, directive_id: str) -> str:
    for d in detail.directives:
        if d.directive_id == directive_id:
            lines = [
                f"[{d.marker}] {d.text}",
                "",
                f"- Rule: {detail.summary.rule_id}",
                f"- Section: {' > '.join(d.section) or '-'}",
                f"- Source: {d.source_path}" + (f":{d.line_start}" if d.line_start else ""),
            ]
            if d.rationale:
                lines.append(f"- Rationale: {d.rationale}")
            return "\n".join(lines) + "\n"
    raise ResourceNotFoundError(
        f"no directive {directive_id!r} in rule {detail.summary.rule_id!r}; "
        f"read {rule_uri(detail.summary.rule_id)} for its directives"
    )


async def _scope(runtime: MemoirRuntime, ctx: Context) -> str:
    decision = scope_for(await roots_for_request(ctx), runtime.scope_defaults, grant=grant_for(ctx))
    return decision.read_scope


async def list_rule_resources(runtime: MemoirRuntime, ctx: Context) -> list[MCPResource]:
    """The rules of the caller's scope as resources (empty when the store is unavailable)."""
    try:
        memoir = await runtime.memoir()
        rules = await memoir.rules.list_rules(scope=await _scope(runtime, ctx))
    except (MemoirError, ModuleNotFoundError) as exc:
        log.info("rule resources not listed", error=str(exc))
        return []
    categories = MCPResource(
        uri=CATEGORIES_URI,
        name="categories",
        title="Knowledge categories",
        description="The category tree of this project's saved knowledge.",
        mime_type=_MARKDOWN,
    )
    return [categories] + [
        MCPResource(
            uri=rule_uri(r.rule_id),
            name=r.rule_id,
            title=redact_text(r.title or r.name),
            description=f"{r.directive_count} directives; layer {r.layer or '-'}",
            mime_type=_MARKDOWN,
        )
        for r in rules[:_MAX_LISTED_RULES]
    ]


def categories_markdown(tree: Any, *, max_depth: int = 0) -> str:
    """The category tree (``CategoryTree``) as an indented markdown list, ``max_depth`` levels
    deep (0: all)."""
    lines = [f"# Knowledge categories ({tree.total} of at most {tree.max_categories})", ""]

    def walk(nodes: Any, depth: int) -> None:
        for node in nodes:
            count = f" ({node.chunk_count})" if node.chunk_count is not None else ""
            lines.append(f"{'  ' * depth}- {node.name}{count}")
            if not max_depth or depth + 1 < max_depth:
                walk(node.children, depth + 1)

    walk(tree.nodes, 0)
    if not tree.nodes:
        lines.append("(nothing ingested yet: use the ingest tool)")
    return "\n".join(lines) + "\n"


def register_resources(app: MCPServer, runtime: MemoirRuntime) -> None:
    """Register the store summary and the rule templates on ``app``."""

    @app.resource(
        STORE_SUMMARY_URI,
        name="store-summary",
        title="memoir store summary",
        description="Counts, embedder and versions of the memoir store (no document text).",
        mime_type="application/json",
    )
    async def store_summary() -> str:
        try:
            memoir = await runtime.memoir()
            stats = await memoir.stats()
        except MemoirError as error:
            raise ResourceError(f"{error.message} (hint: {error.hint})") from error
        return redact_text(json.dumps(stats, default=str, indent=2))

    @app.resource(
        CATEGORIES_URI + "{?depth}",
        name="categories",
        title="Knowledge categories",
        description="The category tree of this project's saved knowledge, with chunk counts "
        "(?depth=N for the top N levels).",
        mime_type=_MARKDOWN,
    )
    async def categories(ctx: Context, depth: int = 0) -> str:
        try:
            memoir = await runtime.memoir()
            tree = await memoir.hierarchy.categories(scope=await _scope(runtime, ctx))
        except MemoirError as error:
            raise ResourceError(f"{error.message} (hint: {error.hint})") from error
        return redact_text(categories_markdown(tree, max_depth=max(0, depth)))

    @app.resource(
        "memoir://rules/{rule_id}",
        name="rule",
        title="A project rule",
        description="One rule of this project with all its directives, as markdown.",
        mime_type=_MARKDOWN,
    )
    async def rule(rule_id: str, ctx: Context) -> str:
        return redact_text(rule_markdown(await _rule_detail(runtime, ctx, rule_id)))

    @app.resource(
        "memoir://rules/{rule_id}/{directive_id}",
        name="directive",
        title="One directive of a rule",
        mime_type=_MARKDOWN,
    )
    async def directive(rule_id: str, directive_id: str, ctx: Context) -> str:
        return redact_text(
            directive_markdown(await _rule_detail(runtime, ctx, rule_id), directive_id)
        )


async def _rule_detail(runtime: MemoirRuntime, ctx: Context, rule_id: str) -> RuleDetail:
    try:
        memoir = await runtime.memoir()
        return await memoir.rules.get_rule(rule_id, scope=await _scope(runtime, ctx))
    except NotFoundError as error:
        raise ResourceNotFoundError(error.message) from error
    except MemoirError as error:
        raise ResourceError(f"{error.message} (hint: {error.hint})") from error
