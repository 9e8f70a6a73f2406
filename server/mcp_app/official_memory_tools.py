"""Compatibility mode: the nine tools of the official memory server
(``@modelcontextprotocol/server-memory``), registered with ``memories.official_server_tools``.

Same names, input fields, ``structuredContent`` shapes and text content (the result as
indented JSON) as the reference server, on memoir's graph tables in the call's memory space
(:mod:`memory_core.memories.graph_compat`): an agent configured for that server works
unchanged, and ``search_nodes`` adds hybrid-search hits after the substring matches.
"""

# No `from __future__ import annotations`: the SDK reads these signatures at registration.

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from memory_core.memories.spaces import MemorySpace
from memory_core.service import Memoir
from server.mcp_app.scoping import require_write_scope
from server.mcp_app.tools import Roots, ToolHost

__all__ = ["OFFICIAL_TOOLS", "register_official_memory_tools"]

OFFICIAL_TOOLS = (
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
)

_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
_DELETE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class EntityIn(BaseModel):
    name: str = Field(description="The name of the entity")
    entityType: str = Field(description="The type of the entity")
    observations: list[str] = Field(
        description="An array of observation contents associated with the entity"
    )


class RelationIn(BaseModel):
    from_: str = Field(alias="from", description="The name of the entity where the relation starts")
    to: str = Field(description="The name of the entity where the relation ends")
    relationType: str = Field(description="The type of the relation")

    def plain(self) -> dict[str, str]:
        return {"from": self.from_, "to": self.to, "relationType": self.relationType}


class ObservationIn(BaseModel):
    entityName: str = Field(description="The name of the entity to add the observations to")
    contents: list[str] = Field(description="An array of observation contents to add")


class DeletionIn(BaseModel):
    entityName: str = Field(description="The name of the entity containing the observations")
    observations: list[str] = Field(description="An array of observations to delete")


class EntitiesOut(BaseModel):
    entities: list[EntityIn]


class RelationsOut(BaseModel):
    relations: list[RelationIn]


class AddedOut(BaseModel):
    entityName: str
    addedObservations: list[str]


class ResultsOut(BaseModel):
    results: list[AddedOut]


class SuccessOut(BaseModel):
    success: bool
    message: str


class GraphOut(BaseModel):
    entities: list[EntityIn]
    relations: list[RelationIn]


def _result(structured: dict[str, Any], text: str) -> CallToolResult:
    """The official server's answer: the result as indented JSON text, and as structure."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def register_official_memory_tools(app: MCPServer, host: ToolHost) -> None:
    """The nine tools, each one call to ``memoir.memories.graph``."""

    def space_of(memoir: Memoir, roots: Any, ctx: Context, *, write: bool) -> MemorySpace:
        decision = host.scope(roots, ctx)
        scope = require_write_scope(decision) if write else decision.read_scope
        return memoir.memories.space(scope)

    @app.tool(
        name="create_entities", title="Create Entities",
        description="Create multiple new entities in the knowledge graph", annotations=_WRITE,
    )  # fmt: skip
    async def create_entities(
        entities: list[EntityIn], ctx: Context, roots: Roots
    ) -> Annotated[CallToolResult, EntitiesOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            created = await memoir.memories.graph.create_entities(
                space_of(memoir, roots, ctx, write=True), [e.model_dump() for e in entities]
            )
            return _result({"entities": created}, json.dumps(created, indent=2, ensure_ascii=False))

        return await host.run(ctx, "create_entities", body, writes=True)

    @app.tool(
        name="create_relations", title="Create Relations",
        description="Create multiple new relations between entities in the knowledge graph. "
        "Relations should be in active voice",
        annotations=_WRITE,
    )  # fmt: skip
    async def create_relations(
        relations: list[RelationIn], ctx: Context, roots: Roots
    ) -> Annotated[CallToolResult, RelationsOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            created = await memoir.memories.graph.create_relations(
                space_of(memoir, roots, ctx, write=True), [r.plain() for r in relations]
            )
            return _result(
                {"relations": created}, json.dumps(created, indent=2, ensure_ascii=False)
            )

        return await host.run(ctx, "create_relations", body, writes=True)

    @app.tool(
        name="add_observations", title="Add Observations",
        description="Add new observations to existing entities in the knowledge graph",
        annotations=_WRITE,
    )  # fmt: skip
    async def add_observations(
        observations: list[ObservationIn], ctx: Context, roots: Roots
    ) -> Annotated[CallToolResult, ResultsOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            results = await memoir.memories.graph.add_observations(
                space_of(memoir, roots, ctx, write=True), [o.model_dump() for o in observations]
            )
            return _result({"results": results}, json.dumps(results, indent=2, ensure_ascii=False))

        return await host.run(ctx, "add_observations", body, writes=True)

    @app.tool(
        name="delete_entities", title="Delete Entities",
        description="Delete multiple entities and their associated relations from the knowledge graph",
        annotations=_DELETE,
    )  # fmt: skip
    async def delete_entities(
        entityNames: Annotated[list[str], Field(description="An array of entity names to delete")],
        ctx: Context,
        roots: Roots,
    ) -> Annotated[CallToolResult, SuccessOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            await memoir.memories.graph.delete_entities(
                space_of(memoir, roots, ctx, write=True), entityNames
            )
            message = "Entities deleted successfully"
            return _result({"success": True, "message": message}, message)

        return await host.run(ctx, "delete_entities", body, writes=True)

    @app.tool(
        name="delete_observations", title="Delete Observations",
        description="Delete specific observations from entities in the knowledge graph",
        annotations=_DELETE,
    )  # fmt: skip
    async def delete_observations(
        deletions: list[DeletionIn], ctx: Context, roots: Roots
    ) -> Annotated[CallToolResult, SuccessOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            await memoir.memories.graph.delete_observations(
                space_of(memoir, roots, ctx, write=True), [d.model_dump() for d in deletions]
            )
            message = "Observations deleted successfully"
            return _result({"success": True, "message": message}, message)

        return await host.run(ctx, "delete_observations", body, writes=True)

    @app.tool(
        name="delete_relations", title="Delete Relations",
        description="Delete multiple relations from the knowledge graph", annotations=_DELETE,
    )  # fmt: skip
    async def delete_relations(
        relations: Annotated[
            list[RelationIn], Field(description="An array of relations to delete")
        ],
        ctx: Context,
        roots: Roots,
    ) -> Annotated[CallToolResult, SuccessOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            await memoir.memories.graph.delete_relations(
                space_of(memoir, roots, ctx, write=True), [r.plain() for r in relations]
            )
            message = "Relations deleted successfully"
            return _result({"success": True, "message": message}, message)

        return await host.run(ctx, "delete_relations", body, writes=True)

    @app.tool(
        name="read_graph", title="Read Graph", description="Read the entire knowledge graph",
        annotations=_READ,
    )  # fmt: skip
    async def read_graph(ctx: Context, roots: Roots) -> Annotated[CallToolResult, GraphOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            graph = await memoir.memories.graph.read_graph(
                space_of(memoir, roots, ctx, write=False)
            )
            return _result(graph, json.dumps(graph, indent=2, ensure_ascii=False))

        return await host.run(ctx, "read_graph", body, writes=False)

    @app.tool(
        name="search_nodes", title="Search Nodes",
        description="Search for nodes in the knowledge graph based on a query", annotations=_READ,
    )  # fmt: skip
    async def search_nodes(
        query: Annotated[
            str,
            Field(
                description="The search query to match against entity names, types, and observation content"
            ),
        ],
        ctx: Context,
        roots: Roots,
    ) -> Annotated[CallToolResult, GraphOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            graph = await memoir.memories.graph.search_nodes(
                space_of(memoir, roots, ctx, write=False), query
            )
            return _result(graph, json.dumps(graph, indent=2, ensure_ascii=False))

        return await host.run(ctx, "search_nodes", body, writes=False)

    @app.tool(
        name="open_nodes", title="Open Nodes",
        description="Open specific nodes in the knowledge graph by their names", annotations=_READ,
    )  # fmt: skip
    async def open_nodes(
        names: Annotated[list[str], Field(description="An array of entity names to retrieve")],
        ctx: Context,
        roots: Roots,
    ) -> Annotated[CallToolResult, GraphOut]:
        async def body(memoir: Memoir) -> CallToolResult:
            graph = await memoir.memories.graph.open_nodes(
                space_of(memoir, roots, ctx, write=False), names
            )
            return _result(graph, json.dumps(graph, indent=2, ensure_ascii=False))

        return await host.run(ctx, "open_nodes", body, writes=False)
