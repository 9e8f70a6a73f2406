"""Oversized MCP requests get an error that names the limit, on every transport.

Over HTTP the guard answers 413 with a JSON-RPC error (``http_guard.BodyLimit``). Over stdio a
line longer than ``limits.request_bytes`` is never held in memory: the reader keeps its first
bytes, drops the rest, and hands the server a small stand-in request with the same id and the
method :data:`OVERSIZE_METHOD`, whose handler answers with the error. The client sees a normal
JSON-RPC error for its request instead of a broken connection.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from pydantic import BaseModel, ConfigDict

__all__ = ["OVERSIZE_METHOD", "OversizeParams", "register_oversize_handler", "stand_in_line"]

OVERSIZE_METHOD = "io.memoir/request_too_large"
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')
PREFIX_BYTES = 4096


class OversizeParams(BaseModel):
    model_config = ConfigDict(extra="allow")

    limit: int
    method: str | None = None


def stand_in_line(prefix: bytes, limit: int) -> str | None:
    """The stand-in request for an oversized line whose first bytes are ``prefix`` (None when
    it carries no id: a notification, which gets no answer)."""
    found = _ID.search(prefix[:PREFIX_BYTES])
    if found is None:
        return None
    method = re.search(rb'"method"\s*:\s*"([^"\\]{1,100})"', prefix[:PREFIX_BYTES])
    params: dict[str, Any] = {"limit": limit}
    if method is not None:
        params["method"] = method.group(1).decode("utf-8", "replace")
    request = {
        "jsonrpc": "2.0",
        "id": json.loads(found.group(1)),
        "method": OVERSIZE_METHOD,
        "params": params,
    }
    return json.dumps(request)


async def _refuse(_ctx: Any, params: OversizeParams) -> Any:
    what = f"the {params.method} request" if params.method else "the request"
    raise MCPError(
        code=INVALID_REQUEST,
        message=f"{what} is larger than {params.limit} bytes (limits.request_bytes): send less "
        "text per call (split it), or raise limits.request_bytes (MEMOIR_LIMITS__REQUEST_BYTES) "
        "on the server",
        data={"limit": params.limit, "setting": "limits.request_bytes"},
    )


def register_oversize_handler(lowlevel: Any) -> None:
    lowlevel.add_request_handler(OVERSIZE_METHOD, OversizeParams, _refuse)
