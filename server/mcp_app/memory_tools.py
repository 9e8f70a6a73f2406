"""The agent-memory MCP tools: ``remember``, ``recall``, ``forget``, ``pin``, ``memory_mode``.

Thin over ``memoir.memories``. The space is the call's project scope (the server's scope
resolution: ``--scope``, MCP roots, the workspace, the git root), the user is
``memories.default_user``; an incognito session is the MCP connection. Descriptions map the
spec's natural-language commands to calls: "what do you remember about X" -> recall, "forget
that" -> forget, "pin this" -> pin, "turn memory off" / "start incognito for this chat" ->
memory_mode.

With ``memories.official_server_tools`` the nine tools of the official memory server are
registered too (:mod:`server.mcp_app.official_memory_tools`).
"""

# No `from __future__ import annotations`: the SDK reads these signatures at registration.

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict

from memory_core.service import Memoir
from server.mcp_app.calls import client_key, ok_result
from server.mcp_app.runtime import MemoirRuntime
from server.mcp_app.scoping import require_write_scope
from server.mcp_app.tools import MEMORY_TOOLS, Roots, ToolHost

__all__ = ["MEMORY_TOOLS", "register_memory_tools"]

_OUT = ConfigDict(extra="forbid")
_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_SAVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_DELETE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

_REMEMBER = """\
Keep a lasting user preference, decision or commitment; repeats merge. "Remember…" -> \
saved; "pin this" -> pin. Example: {"text": "User prefers pnpm"}"""
_RECALL = """\
"What do you remember about X?": memories ranked by relevance, recency, importance. \
Example: {"query": "package manager"}"""
_FORGET = """\
"Forget that": delete a memory by id; no re-save for 24 h. Example: {"memory_id": "3f2a9c1b"}"""
_PIN = """\
"Pin this"/"unpin": pinned memories are never trimmed. Example: {"memory_id": "3f2a9c1b"}"""
_MODE = """\
"Turn memory off/on", "start/end incognito" (nothing saved or recalled in this chat). \
Example: {"incognito": true}"""


class RememberOut(BaseModel):
    model_config = _OUT

    status: str
    id: str | None
    superseded: list[str]


class MemoryHit(BaseModel):
    model_config = _OUT

    id: str
    text: str
    score: float


class RecallOut(BaseModel):
    model_config = _OUT

    memories: list[MemoryHit]
    context: str


class ForgetOut(BaseModel):
    model_config = _OUT

    id: str
    forgotten: bool


class PinOut(BaseModel):
    model_config = _OUT

    id: str
    pinned: bool


class ModeOut(BaseModel):
    model_config = _OUT

    memory_enabled: bool
    incognito: bool


def register_memory_tools(app: MCPServer, runtime: MemoirRuntime) -> None:
    """Register the memory tools (and the official server's nine with the setting)."""
    host = ToolHost(runtime)
    settings = runtime.settings

    @app.tool(name="remember", description=_REMEMBER, annotations=_SAVE)
    async def remember(
        text: str,
        ctx: Context,
        roots: Roots,
        saved: bool = False,
        pin: bool = False,
    ) -> Annotated[CallToolResult, RememberOut]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            result = await memoir.memories.remember(
                text, space=require_write_scope(decision), manually_saved=saved, pin=pin, session=client_key(ctx),
            )  # fmt: skip
            out = RememberOut(
                status=result.status,
                id=result.memory.id if result.memory else None,
                superseded=result.superseded,
            )
            text_out = f"{result.status} {out.id or ''}".strip()
            if result.reason:
                text_out += f": {result.reason}"
            return ok_result(out, text_out)

        return await host.run(ctx, "remember", body, writes=True)

    @app.tool(name="recall", description=_RECALL, annotations=_READ)
    async def recall(
        query: str,
        ctx: Context,
        roots: Roots,
        k: int | None = None,
    ) -> Annotated[CallToolResult, RecallOut]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            result = await memoir.memories.recall(
                query, space=decision.read_scope, k=k, session=client_key(ctx)
            )
            out = RecallOut(
                memories=[
                    MemoryHit(id=h.id, text=h.text, score=round(h.scores.total, 3))
                    for h in result.results
                ],
                context=result.context,
            )
            note = "; ".join(result.warnings)
            text_out = result.context or f"Nothing remembered about {query!r}."
            return ok_result(out, f"{text_out}\n({note})" if note else text_out)

        # Recall writes last_scores, but never blocks a reader: a bounded read-like call.
        return await host.run(ctx, "recall", body, writes=False)

    @app.tool(name="forget", description=_FORGET, annotations=_DELETE)
    async def forget(
        memory_id: str, ctx: Context, roots: Roots
    ) -> Annotated[CallToolResult, ForgetOut]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            result = await memoir.memories.forget(memory_id, space=require_write_scope(decision))
            return ok_result(ForgetOut(id=result.id, forgotten=True), f"forgot {result.id}")

        return await host.run(ctx, "forget", body, writes=True)

    @app.tool(name="pin", description=_PIN, annotations=_SAVE)
    async def pin(
        memory_id: str,
        ctx: Context,
        roots: Roots,
        pinned: bool = True,
    ) -> Annotated[CallToolResult, PinOut]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            space = require_write_scope(decision)
            method = memoir.memories.pin if pinned else memoir.memories.unpin
            view = await method(memory_id, space=space)
            return ok_result(
                PinOut(id=view.id, pinned=view.pinned),
                f"{'pinned' if view.pinned else 'unpinned'} {view.id}",
            )

        return await host.run(ctx, "pin", body, writes=True)

    @app.tool(name="memory_mode", description=_MODE, annotations=_SAVE)
    async def memory_mode(
        ctx: Context,
        roots: Roots,
        memory: Literal["on", "off"] | None = None,
        incognito: bool | None = None,
    ) -> Annotated[CallToolResult, ModeOut]:
        decision = host.scope(roots, ctx)

        async def body(memoir: Memoir) -> CallToolResult:
            space = require_write_scope(decision)
            session = client_key(ctx)
            if memory is not None:
                view = await memoir.memories.update_settings(
                    space=space, memory_enabled=memory == "on"
                )
            if incognito is not None:
                method = (
                    memoir.memories.incognito_start if incognito else memoir.memories.incognito_end
                )
                view = await method(space=space, session=session)
            else:
                view = await memoir.memories.settings(space=space, session=session)
            out = ModeOut(memory_enabled=view.memory_enabled, incognito=view.incognito)
            return ok_result(
                out,
                f"memory {'on' if out.memory_enabled else 'off'}, incognito {'on' if out.incognito else 'off'}",
            )

        return await host.run(ctx, "memory_mode", body, writes=True)

    if settings.memories.official_server_tools:
        from server.mcp_app.official_memory_tools import register_official_memory_tools

        register_official_memory_tools(app, host)
