"""The client's own model through MCP sampling, for ``ingest`` and ``query``, when it offers one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.mcpserver import Context

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from memory_core.config import Settings

__all__ = ["sampling_model"]


def sampling_model(ctx: Context, settings: Settings) -> Model | None:
    """The client's own LLM through MCP sampling, when it offers it and the settings allow it."""
    if not settings.llm.use_mcp_sampling:
        return None
    caps = ctx.client_capabilities
    if caps is None or caps.sampling is None or not ctx.session.can_send_request:
        return None
    from pydantic_ai.models.mcp_sampling import MCPSamplingModel

    return MCPSamplingModel(session=ctx.session)
