"""Which core answers ``ingest`` and ``query``: the category hierarchy (issue 6) when it is in
this build, else the documents engine (issue 3); and the client's model through MCP sampling
when it offers one."""

from __future__ import annotations

import functools
from typing import Any

from mcp.server.mcpserver import Context

from memory_core.errors import MemoirError
from server.mcp_app import shaping
from server.mcp_app.schemas import IngestOutput, QueryOutput

__all__ = ["has_hierarchy", "ingest_documents", "query_documents", "sampling_model"]


@functools.cache
def has_hierarchy() -> bool:
    # The category-hierarchy core (issue 6) may not be in this build; until it is, ingest and
    # query use the documents engine (issue 3) so the tools still work.
    import importlib.util

    return importlib.util.find_spec("memory_core.hierarchy.service") is not None


@functools.cache
def has_documents() -> bool:
    import importlib.util

    return importlib.util.find_spec("memory_core.documents.service") is not None


def _not_available(what: str) -> MemoirError:
    return MemoirError(
        f"{what} is not available in this build of memoir",
        hint="upgrade memoir; rules tools (query_directives, upsert_markdown) still work",
    )


async def ingest_documents(
    memoir: Any, text: str, *, scope: str, source: str | None
) -> IngestOutput:
    if not has_documents():
        raise _not_available("ingest (knowledge store)")
    from memory_core.models import content_hash

    # The documents engine files text under a virtual path; the content hash keeps it stable.
    path = f"mcp/{content_hash(text)[:16]}.md"
    result = await memoir.documents.add_text(text, path=path, scope=scope, source=source)
    return shaping.ingest_output_from_documents(result)


async def query_documents(memoir: Any, question: str, *, scope: str) -> QueryOutput:
    if not has_documents():
        raise _not_available("query (knowledge store)")
    result = await memoir.documents.search(question, scope=scope)
    return shaping.query_output_from_documents(result)


def sampling_model(ctx: Context, settings: Any) -> Any:
    """The client's own LLM through MCP sampling, when it offers it and the settings allow it."""
    if not settings.llm.use_mcp_sampling:
        return None
    caps = ctx.client_capabilities
    if caps is None or caps.sampling is None or not ctx.session.can_send_request:
        return None
    from pydantic_ai.models.mcp_sampling import MCPSamplingModel

    return MCPSamplingModel(session=ctx.session)
