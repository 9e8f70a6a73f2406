"""The server factory: one :class:`MemoirMCPServer` with memoir's tools, resources and prompts.

No global server object: :func:`build_server` takes the runtime (store, settings, scope
defaults) and returns a fresh server, so tests build as many as they like.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    ListResourcesResult,
    NotificationParams,
    PaginatedRequestParams,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)
from mcp_types import Tool as MCPTool
from pydantic import ValidationError

from server.mcp_app.arguments import argument_error_result, unknown_arguments
from server.mcp_app.calls import RootsCache
from server.mcp_app.notify import subscriptions
from server.mcp_app.oversize import register_oversize_handler
from server.mcp_app.prompts import register_prompts
from server.mcp_app.resources import list_rule_resources, register_resources
from server.mcp_app.runtime import MemoirRuntime
from server.mcp_app.tools import DEFAULT_TOOLS, EXTRA_TOOLS, register_tools

__all__ = ["INSTRUCTIONS", "MemoirMCPServer", "build_server", "compact_schema", "inline_refs"]

INSTRUCTIONS = (
    "memoir holds this project's rules and knowledge. At the start of every coding task call "
    "query_directives with the task and follow its MUST directives as non-negotiable. Save "
    "durable decisions and facts with ingest; ask them back with query. Keep the user's "
    "lasting preferences and commitments with remember; recall them when they may matter."
)


_OUTPUT_NOISE = {"additionalProperties", "description", "default"}


def compact_schema(schema: Any, *, output: bool = False) -> Any:
    """The same JSON schema in fewer tokens (every session pays for the tool list).

    Drops the ``title`` pydantic adds to every object and property (it repeats the name) and
    ``"default": null``; folds ``anyOf: [{type: T, …}, {type: null}]`` into ``type: [T, "null"]``.
    For output schemas it also drops ``additionalProperties``, ``required``, defaults and
    descriptions. A property that is itself *named* ``title`` or ``default`` is kept.
    """
    if isinstance(schema, list):
        return [compact_schema(v, output=output) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and not isinstance(value, dict):
            continue
        if key == "default" and value is None:
            continue
        # Output schemas describe what the server sends; the client validates against them, the
        # model rarely reads them: keep the shape (types, properties), drop the prose.
        if output and key in _OUTPUT_NOISE and not isinstance(value, dict | list):
            continue
        if output and key == "required":
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            out[key] = {
                name: _drop_description(
                    compact_schema(prop, output=output), output and key == "$defs"
                )
                for name, prop in value.items()
            }
        else:
            out[key] = compact_schema(value, output=output)
    return _fold_nullable(out)


def inline_refs(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """Replace ``{"$ref": "#/$defs/X"}`` by X itself (no recursive models here, and each is used
    once or twice: the inlined schema is shorter than the reference plus its definition)."""
    if isinstance(schema, dict):
        if defs is None:
            defs = schema.get("$defs", {})
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [inline_refs(v, defs) for v in schema]
    return schema


def _drop_description(schema: Any, drop: bool) -> Any:
    if drop and isinstance(schema, dict):
        schema.pop("description", None)
    return schema


def _fold_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    options = schema.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return schema
    other = next(o for o in options if o != {"type": "null"})
    if not isinstance(other.get("type"), str):
        return schema
    folded = {k: v for k, v in schema.items() if k != "anyOf"}
    folded.update(other)
    folded["type"] = [other["type"], "null"]
    if "enum" in folded:
        folded["enum"] = [*folded["enum"], None]
    return folded


_TOOL_ORDER = {name: rank for rank, name in enumerate((*DEFAULT_TOOLS, *EXTRA_TOOLS))}


def _tool_order(tool: MCPTool) -> tuple[int, str]:
    """The advertised order: the default tools as documented, then the extra ones, then any
    other by name; the same on every protocol revision and in every process (clients cache
    the list, and a reordered list reads as a changed one)."""
    return (_TOOL_ORDER.get(tool.name, len(_TOOL_ORDER)), tool.name)


class MemoirMCPServer(MCPServer[Any]):
    """``MCPServer`` with compact tool schemas in a fixed order, and the caller's rules in
    ``resources/list``."""

    def __init__(self, runtime: MemoirRuntime, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runtime = runtime
        self.roots_cache = RootsCache()

    async def list_tools(self) -> list[MCPTool]:
        tools = sorted(await super().list_tools(), key=_tool_order)
        self.runtime.warm()  # the client is connected: now load the store and the model
        return [
            tool.model_copy(
                update={
                    "input_schema": compact_schema(tool.input_schema),
                    "output_schema": compact_schema(inline_refs(tool.output_schema), output=True),
                }
            )
            for tool in tools
        ]

    # An unknown tool is the client's protocol mistake (JSON-RPC invalid params), not a tool
    # failure for the model to read; the SDK would answer it as an isError result.
    async def _handle_call_tool(self, ctx: Any, params: CallToolRequestParams) -> Any:
        tool = self._tool_manager.get_tool(params.name)
        if tool is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Unknown tool: {params.name!r}",
                data={"known_tools": [t.name for t in self._tool_manager.list_tools()]},
            )
        return await super()._handle_call_tool(ctx, params)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """The SDK's call, with argument mistakes told plainly (:mod:`server.mcp_app.arguments`)
        instead of pydantic's raw text; an argument the tool does not take is one of them."""
        tool = self._tool_manager.get_tool(name)
        if tool is not None and unknown_arguments(tool.parameters, arguments):
            return argument_error_result(name, tool.parameters, arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if tool is None or isinstance(exc, UnexpectedToolError):
                raise
            if not isinstance(cause, ValidationError):
                raise
            return argument_error_result(name, tool.parameters, arguments, cause)

    # The SDK lists static resources only; the rules depend on the caller's roots, so the
    # handler (which has the request) adds them.
    async def _handle_list_resources(
        self, ctx: Any, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        base = await super()._handle_list_resources(ctx, params)
        context = Context(request_context=ctx, mcp_server=self)
        rules = await list_rule_resources(self.runtime, context)
        return ListResourcesResult(resources=[*base.resources, *rules])


def build_server(runtime: MemoirRuntime, *, version: str = "") -> MemoirMCPServer:
    """A server with memoir's tools (plus the extra ones when ``server.extra_tools``),
    resources and prompts, over ``runtime``."""
    settings = runtime.settings
    app = MemoirMCPServer(
        runtime,
        name="memoir",
        title="memoir",
        description="Project rules and knowledge for coding agents.",
        instructions=INSTRUCTIONS,
        version=version,
        log_level=settings.logging.level.upper(),  # type: ignore[arg-type]
    )
    register_tools(app, runtime, extra=settings.server.extra_tools)
    register_resources(app, runtime)
    register_prompts(app, runtime)
    lowlevel = app._lowlevel_server  # the SDK exposes no public hook for resources/subscribe
    lowlevel.add_request_handler(
        "resources/subscribe", SubscribeRequestParams, subscriptions.on_subscribe
    )
    lowlevel.add_request_handler(
        "resources/unsubscribe", UnsubscribeRequestParams, subscriptions.on_unsubscribe
    )
    lowlevel.add_notification_handler(
        "notifications/roots/list_changed", NotificationParams, app.roots_cache.on_list_changed
    )
    register_oversize_handler(lowlevel)
    return app
