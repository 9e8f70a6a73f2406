"""REST routes served beside MCP by the HTTP process (``/v1/…``), behind the same guards.

Every route but ``/healthz`` needs the caller's credentials when any are configured (the guard
in :mod:`server.mcp_app.http_guard` refuses it otherwise), and answers in the scope the server
decides for that caller, exactly as the MCP tools do. Responses are redacted.

- ``/v1/memory/…``, ``/v1/openapi.json`` and the ``/memory`` page: the agent's memories
  (:mod:`server.mcp_app.memory_rest`).
- ``GET /v1/whoami``: who the server takes the caller for, the projects it may use, and the
  scope its calls land in (roots are an MCP notion: a REST call gets the default decision).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memory_core.redaction import redact_value
from server.mcp_app.app import MemoirMCPServer
from server.mcp_app.auth import grant_of_request, principal_of_request
from server.mcp_app.calls import scope_for
from server.mcp_app.runtime import MemoirRuntime

__all__ = ["add_rest_routes"]


def add_rest_routes(app: MemoirMCPServer, runtime: MemoirRuntime) -> None:
    @app.custom_route("/v1/whoami", methods=["GET"])
    async def whoami(request: Request) -> Response:
        grant = grant_of_request(request)
        decision = scope_for([], runtime.scope_defaults, grant=grant)
        body = {
            "principal": principal_of_request(request),
            "workspaces": [str(p) for p in (grant if grant is not None else decision.readable)],
            "scope": decision.scope,
            "scope_source": decision.source,
        }
        return JSONResponse(redact_value(body))

    from server.mcp_app.memory_rest import add_memory_routes

    add_memory_routes(app, runtime)
