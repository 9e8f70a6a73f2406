"""The memory layer's MCP tools, ``memorize`` and ``retrieve`` (issue 12): registered with
``server.extra_tools`` when ``server.layer_file`` names a memoir-layer.toml.

Trust boundary: the layer (its store, scope model, taxonomy and selector policy) comes from the
server's own configuration, never from a client. A client supplies content or a query and the
values of the scope fields the server leaves open; ``server.layer_scope`` must fix every
boundary field of the layer, and a client value for a fixed field that differs from it (a
list, ``*``) is refused, so no client reads or writes outside the boundary the operator chose.
Resources are text only: a client cannot make the server read a file or a URI.

Each call passes who makes it as ``principal`` (:func:`~server.mcp_app.auth.caller_principal`:
the verified token's client over HTTP, the local OS user on stdio), which matters when the layer
file names an ``authorise`` hook: it sees the principal and the scope, and may narrow or refuse.
"""

# No `from __future__ import annotations`: the SDK reads these signatures at registration.

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from memory_core.config import Settings
from memory_core.errors import ConfigError, InvalidInputError, MemoirError, StorageError
from memory_core.pipeline.async_service import AsyncMemoryService
from memory_core.pipeline.layer_file import open_layer_file
from memory_core.pipeline.scopes import ScopeSelector
from memory_core.redaction import redact_text
from server.mcp_app.auth import caller_principal
from server.mcp_app.calls import ok_result

if TYPE_CHECKING:
    from server.mcp_app.tools import ToolHost

__all__ = ["LAYER_TOOLS", "LayerHost", "register_layer_tools"]

LAYER_TOOLS = ("memorize", "retrieve")
log = structlog.get_logger(__name__)

_MEMORIZE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_MAX_CONTENT = 200_000  # characters of one memorized resource


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "system", "tool"]
    content: Annotated[str, Field(max_length=_MAX_CONTENT)]


class MemorizeOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resource_id: str | None
    duplicate: bool
    items_added: list[str]
    items_merged: list[str]
    categories: list[str]
    scope: dict[str, str]


class RetrieveOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context: str
    layer: str
    items: list[dict[str, Any]]
    fallbacks: list[str]
    scope: dict[str, Any]


class LayerHost:
    """The server's one layer service, opened on first use from ``server.layer_file``."""

    def __init__(self, settings: Settings) -> None:
        self.path = Path(settings.server.layer_file or "")
        self.llm = settings.llm  # the layer file's profiles may reuse memoir.toml's by name
        self.fixed = dict(settings.server.layer_scope)
        self._service: AsyncMemoryService | None = None
        self._lock = anyio.Lock()

    async def service(self) -> AsyncMemoryService:
        async with self._lock:
            if self._service is None:
                try:
                    sync = await anyio.to_thread.run_sync(open_layer_file, self.path, self.llm)
                except MemoirError as error:  # its code and hint stand; say which layer
                    error.message = self._cannot_open_prefix() + redact_text(error.message)
                    error.args = (error.message,)
                    raise
                except Exception as exc:  # the tool's edge: say which layer, why, and the fix
                    raise self._cannot_open(exc) from exc
                try:
                    self._check_fixed(sync.meta)
                except ConfigError:
                    sync.close()
                    raise
                self._service = AsyncMemoryService(sync)
        return self._service

    def _cannot_open_prefix(self) -> str:
        return f"the memory layer of {self.path} cannot be opened: "

    def _cannot_open(self, exc: Exception) -> StorageError:
        """A failure to open the layer that is not one of memoir's errors, naming the layer
        file, the cause (secrets redacted) and where to look."""
        log.exception("layer store failed to open", layer_file=str(self.path))
        return StorageError(
            self._cannot_open_prefix() + redact_text(f"{type(exc).__name__}: {exc}"),
            hint=f"check {self.path} (its store, scope_fields, categories, …) against "
            "`memoir pipeline --help`; the server log has the traceback",
        )

    def _check_fixed(self, meta: dict[str, Any]) -> None:
        fields = [f["name"] for f in meta["scope_fields"]]
        unknown = sorted(set(self.fixed) - set(fields))
        if unknown:
            raise ConfigError(
                f"server.layer_scope names {unknown}, which are not scope fields of the layer "
                f"in {self.path} ({fields})",
                hint="fix server.layer_scope in memoir.toml",
            )
        open_boundary = [f for f in meta["boundary_fields"] if f not in self.fixed]
        if open_boundary:
            raise ConfigError(
                f"server.layer_scope leaves the boundary fields {open_boundary} of {self.path} "
                "to the client",
                hint="fix each boundary field in memoir.toml, e.g. [server.layer_scope] "
                f'{open_boundary[0]} = "acme"',
            )

    def scope(self, given: dict[str, Any]) -> dict[str, Any]:
        """The client's values with the fixed ones enforced (a differing value is refused)."""
        for name, value in given.items():
            if name in self.fixed and value != self.fixed[name]:
                raise InvalidInputError(
                    f"scope field {name!r} is fixed to {self.fixed[name]!r} by this server; "
                    f"got {value!r}",
                    hint=f"leave {name!r} out (the server fills it in)",
                )
        return {**given, **self.fixed}


def register_layer_tools(app: MCPServer, host: "ToolHost", layer: LayerHost) -> None:
    @app.tool(
        name="memorize",
        description="Store text or a conversation in the application's memory layer: it "
        "extracts items, categorises them and updates the intention. Scope: the values of the "
        'layer\'s open scope fields. Example: {"content": "I prefer tea", "scope": '
        '{"user_id": "alice"}}',
        annotations=_MEMORIZE,
    )
    async def memorize(
        ctx: Context,
        content: Annotated[str | None, Field(min_length=1, max_length=_MAX_CONTENT)] = None,
        conversation: Annotated[list[Message] | None, Field(min_length=1, max_length=500)] = None,
        scope: dict[str, str] = {},  # noqa: B006
    ) -> Annotated[CallToolResult, MemorizeOut]:
        async def body(_: Any) -> CallToolResult:
            service = await layer.service()
            full = layer.scope(scope)
            messages = None if conversation is None else [m.model_dump() for m in conversation]
            result = await service.memorize(
                full, content=content, conversation=messages, principal=caller_principal(ctx)
            )
            out = MemorizeOut(
                resource_id=result.resource_id,
                duplicate=result.duplicate,
                items_added=result.items_added,
                items_merged=result.items_merged,
                categories=result.categories,
                scope=full,
            )
            text = (
                "already memorized (same content)"
                if out.duplicate
                else f"memorized: {len(out.items_added)} items added, "
                f"{len(out.items_merged)} merged"
            )
            return ok_result(out, text)

        return await host.run(ctx, "memorize", body, writes=True)

    @app.tool(
        name="retrieve",
        description="Retrieve what the memory layer knows for a query, as a context block. "
        'Scope: each open field a value, a list, or "*" for any. Example: {"query": "drinks?", '
        '"scope": {"user_id": "alice"}}',
        annotations=_READ,
    )
    async def retrieve(
        query: Annotated[str, Field(min_length=1, max_length=4000)],
        ctx: Context,
        scope: dict[str, str | list[str]] = {},  # noqa: B006
    ) -> Annotated[CallToolResult, RetrieveOut]:
        async def body(_: Any) -> CallToolResult:
            service = await layer.service()
            selector = layer.scope(scope)
            result = await service.retrieve(
                ScopeSelector(selector), query, principal=caller_principal(ctx)
            )
            out = RetrieveOut(
                context=result.context,
                layer=result.layer,
                items=result.items,
                fallbacks=result.fallbacks,
                scope=ScopeSelector(selector).describe(),
            )
            return ok_result(out, out.context or "Nothing in memory for this query.")

        return await host.run(ctx, "retrieve", body, writes=False)
