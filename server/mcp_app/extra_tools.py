"""Rarely used tools, registered only with ``server.extra_tools = true`` (they cost tokens in
every session's tool list): ``list_rules``, ``search`` and ``forget_knowledge``."""

# No `from __future__ import annotations`: the SDK reads these signatures at registration.

from typing import TYPE_CHECKING, Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from memory_core.service import Memoir
from server.mcp_app import shaping
from server.mcp_app.calls import ok_result
from server.mcp_app.schemas import QueryOutput
from server.mcp_app.scoping import require_write_scope

if TYPE_CHECKING:
    from server.mcp_app.tools import ToolHost

__all__ = ["RuleList", "register_extra_tools"]

_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_DELETE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


class RuleRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule_id: str
    title: str | None
    layer: str | None
    directives: int


class KnowledgeRemovalOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chunks: int
    categories: int


class RuleList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[RuleRow]


def register_extra_tools(app: MCPServer, host: "ToolHost") -> None:
    from server.mcp_app.tools import Roots  # the shared roots resolver annotation

    @app.tool(
        name="list_rules",
        description="List the project's rules (id, title, layer, directive count).",
        annotations=_READ,
    )
    async def list_rules(ctx: Context, roots: Roots) -> Annotated[CallToolResult, RuleList]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            rules = await memoir.rules.list_rules(scope=decision.read_scope)
            out = RuleList(
                rules=[
                    RuleRow(
                        rule_id=r.rule_id,
                        title=r.title or r.name,
                        layer=r.layer,
                        directives=r.directive_count,
                    )
                    for r in rules
                ]
            )
            text = "\n".join(
                f"{r.rule_id}: {r.title} ({r.layer or '-'}, {r.directives})" for r in out.rules
            )
            return ok_result(out, text or "No rules in this project yet.")

        return await host.run(ctx, "list_rules", body, writes=False, decision=decision)

    @app.tool(
        name="search",
        description="Hybrid search over saved documents; returns matching passages.",
        annotations=_READ,
    )
    async def search(
        text: Annotated[str, Field(min_length=1)], ctx: Context, roots: Roots
    ) -> Annotated[CallToolResult, QueryOutput]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            result = await memoir.documents.search(text, scope=decision.read_scope)
            out = shaping.query_output_from_documents(result)
            return ok_result(out, shaping.query_text(out))

        return await host.run(ctx, "search", body, writes=False, decision=decision)

    @app.tool(
        name="forget_knowledge",
        description="Remove saved knowledge (ingest): chunks by id, everything from a source, or "
        'a category with its subtree. Example: {"category": "Ops / Deploys"}',
        annotations=_DELETE,
    )
    async def forget_knowledge(
        ctx: Context,
        roots: Roots,
        chunk_ids: Annotated[list[str], Field(max_length=1000)] = [],  # noqa: B006
        source: str | None = None,
        category: str | None = None,
    ) -> Annotated[CallToolResult, KnowledgeRemovalOut]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            removed = await memoir.hierarchy.forget(
                scope=require_write_scope(decision),
                chunk_ids=chunk_ids,
                source=source,
                category=category,
            )
            out = KnowledgeRemovalOut(chunks=removed.chunks, categories=removed.categories)
            return ok_result(
                out, f"removed {out.chunks} chunks and {out.categories} emptied categories"
            )

        return await host.run(ctx, "forget_knowledge", body, writes=True, decision=decision)
