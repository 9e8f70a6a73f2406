"""The last step of every tool call, resource read and prompt: what leaves the server.

- the scope the server decided is echoed in the result's ``_meta`` (``io.memoir/scope``,
  ``io.memoir/scope_source``: metadata costs no tokens in the tool list), with a warning the
  model reads when the client's roots were ignored;
- the store's health is reported (``io.memoir/store``: ``ok``, ``unchecked``, ``corrupt``,
  ``replaced``, ``read_only``), and a store that cannot keep writes adds a warning the model
  reads;
- every string is redacted (:mod:`memory_core.redaction`): a key ingested by mistake, or named
  in a rule's title, does not come back out.
"""

from __future__ import annotations

from typing import Any

from mcp_types import CallToolResult, TextContent

from memory_core.models import StoreHealth
from memory_core.redaction import redact_text, redact_value
from server.mcp_app.scoping import ScopeDecision

__all__ = [
    "META_SCOPE",
    "META_SCOPE_SOURCE",
    "META_STORE",
    "finish_result",
    "health_warning",
    "redact_result",
]

META_SCOPE = "io.memoir/scope"
META_SCOPE_SOURCE = "io.memoir/scope_source"
META_STORE = "io.memoir/store"


def health_warning(health: StoreHealth) -> str | None:
    """A warning for a store that cannot be trusted (None when it can)."""
    if health.status in ("ok", "unchecked", "unknown"):
        return None
    hint = f" ({health.hint})" if health.hint else ""
    return f"store {health.status}: {health.detail}; writes are refused{hint}"


def redact_result(result: CallToolResult) -> CallToolResult:
    content = [
        TextContent(type="text", text=redact_text(block.text))
        if isinstance(block, TextContent)
        else block
        for block in result.content
    ]
    structured = result.structured_content
    return result.model_copy(
        update={
            "content": content,
            "structured_content": redact_value(structured) if structured is not None else None,
        }
    )


def _add_warnings(structured: dict[str, Any], warnings: list[str]) -> None:
    target: Any = structured
    if isinstance(structured.get("diagnostics"), dict):  # query_directives keeps them there
        target = structured["diagnostics"]
    # Only where the output schema has warnings (the SDK validates the shape): elsewhere
    # the text content carries them.
    if isinstance(target.get("warnings"), list):
        target["warnings"] = [*target["warnings"], *warnings]


def finish_result(
    result: CallToolResult, decision: ScopeDecision | None, health: StoreHealth | None
) -> CallToolResult:
    """Echo the scope and the store's health into ``result``, then redact it."""
    structured = dict(result.structured_content) if result.structured_content is not None else None
    meta = dict(result.meta or {})
    warnings: list[str] = []
    if decision is not None:
        meta[META_SCOPE] = decision.scope
        meta[META_SCOPE_SOURCE] = decision.source
        warnings += list(decision.warnings)
    if health is not None:
        meta[META_STORE] = health.status
        problem = health_warning(health)
        if problem is not None:
            warnings.append(problem)
    content = list(result.content)
    if warnings:
        if structured is not None and not result.is_error:
            _add_warnings(structured, warnings)
        content.append(TextContent(type="text", text="\n".join(f"Warning: {w}" for w in warnings)))
    return redact_result(
        result.model_copy(
            update={"structured_content": structured, "content": content, "meta": meta}
        )
    )
