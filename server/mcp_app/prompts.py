"""Prompts: start a coding session with the project's directives (Requirement 9.2–9.5), and save
what was learned.

``start_coding_session`` runs ``query_directives`` for the task itself and frames the MUST
directives as non-negotiable; when the memory is unavailable it falls back to a minimal set of
core rules and says why (Requirements 9.3, 9.6), so the session is never blocked.
"""

# No `from __future__ import annotations`: the SDK reads these signatures at registration.

from typing import Annotated, Any

import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from pydantic import Field

from memory_core.errors import MemoirError
from memory_core.redaction import redact_text
from server.mcp_app.auth import grant_for
from server.mcp_app.calls import roots_for_request, scope_for
from server.mcp_app.runtime import MemoirRuntime

__all__ = ["FALLBACK_RULES", "register_prompts", "session_prompt_text"]

log = structlog.get_logger(__name__)

# Requirement 9.3: what an agent follows when the memory cannot answer.
FALLBACK_RULES = """\
- [MUST] Validate every input at the boundary; reject what you cannot parse.
- [MUST] Never put secrets, keys or tokens in code, logs or commits.
- [MUST] Handle errors explicitly; never swallow them silently.
- [SHOULD] Keep changes small, named clearly, and covered by tests.
- [SHOULD] Follow the conventions already present in the code you touch."""


def session_prompt_text(
    task: str, context_block: str | None, problem: str | None, note: str | None = None
) -> str:
    """The opening message of a coding session (pure, for tests and reuse)."""
    head = [
        f"You are starting a coding task: {task.strip()}",
        "",
        "Before writing any code, read the project directives below. Directives marked MUST "
        "are non-negotiable requirements: the code you produce must satisfy every one of them, "
        "and if a MUST directive conflicts with the request, say so instead of breaking it. "
        "SHOULD directives are strong defaults; MAY ones are options. Cite a directive by "
        "its [n] when a decision follows from it.",
        "",
    ]
    if context_block is not None:
        body = [context_block.rstrip()]
        if note:
            body.append(f"\n(Note: {note})")
    else:
        body = [
            f"(The project's directives could not be retrieved: {problem}. Follow these core "
            "rules until they are available, and call query_directives again later.)",
            "",
            FALLBACK_RULES,
        ]
    tail = [
        "",
        "When the task changes direction (new layer, new topic), call the query_directives tool "
        "again with the new task.",
    ]
    return "\n".join(head + body + tail)


def register_prompts(app: MCPServer, runtime: MemoirRuntime) -> None:
    """Register ``start_coding_session`` and ``save_knowledge`` on ``app``."""

    @app.prompt(
        name="start_coding_session",
        title="Start a coding session with the project's rules",
        description="Fetches the directives for your task (query_directives) and frames the "
        "MUST directives as non-negotiable.",
    )
    async def start_coding_session(
        task: Annotated[str, Field(description="What you are about to build or change.")],
        ctx: Context,
    ) -> list[Any]:
        block: str | None = None
        problem: str | None = None
        note: str | None = None
        try:
            memoir = await runtime.memoir()
            decision = scope_for(
                await roots_for_request(ctx), runtime.scope_defaults, grant=grant_for(ctx)
            )
            result = await memoir.rules.query_directives(task, scope=decision.read_scope)
            block = result.context_block
            if not result.diagnostics.semantic_available:
                # Never embed a degraded block silently.
                note = (
                    "these directives were ranked by keywords only ("
                    + "; ".join(result.diagnostics.warnings[:2])
                    + "); call query_directives again for a full ranking."
                )
        except MemoirError as error:
            problem = error.message
            log.info("session prompt without directives", error=error.code)
        return [UserMessage(redact_text(session_prompt_text(task, block, problem, note)))]

    @app.prompt(
        name="save_knowledge",
        title="Save what was learned",
        description="Asks you to store decisions and facts from this session with ingest.",
    )
    def save_knowledge(
        topic: Annotated[str, Field(description="What to look back on (optional).")] = "",
    ) -> list[Any]:
        about = f" about {topic.strip()}" if topic.strip() else ""
        text = (
            f"Look back over this session{about}. List the durable knowledge worth keeping: "
            "decisions and their reasons, facts about the project, conventions you discovered, "
            "pitfalls and how they were solved. Skip anything temporary, anything already in "
            "the code, and any secret.\n\n"
            "Then call the `ingest` tool once per item, with a self-contained `text` (one to "
            "three sentences that make sense without this conversation), a `source` naming "
            "where it came from (file, ticket or 'session') and a `category` path, broadest "
            "first (e.g. 'Ops / Deploys'), reusing the names in the memoir://categories "
            "resource where they fit. If an item is a rule the team "
            "should always follow, propose it as a markdown rule document and load it with "
            "`upsert_markdown` instead."
        )
        return [UserMessage(redact_text(text))]
