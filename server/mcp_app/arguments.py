"""Tool arguments the server does not know are refused, not silently ignored.

A misspelled argument (``budget`` for ``token_budget``) would otherwise be dropped by the
schema validation and the call would run with the default: the agent believes it asked for
something it did not get. The refusal is a JSON-RPC invalid-params error naming the unknown
argument, the closest known one, and the full list.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

__all__ = ["check_arguments"]


def check_arguments(
    tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any] | None
) -> None:
    """Raises:
    MCPError: ``arguments`` holds a name the tool's input schema does not declare.
    """
    known = sorted((schema.get("properties") or {}).keys())
    unknown = sorted(set(arguments or {}) - set(known))
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hints.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    raise MCPError(
        code=INVALID_PARAMS,
        message=f"unknown argument{'s' if len(unknown) > 1 else ''} for {tool}: "
        + ", ".join(hints)
        + f"; {tool} takes: {', '.join(known) or 'no arguments'}",
        data={"unknown": unknown, "known": known},
    )
