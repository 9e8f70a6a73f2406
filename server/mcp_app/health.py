"""``GET /healthz`` on the HTTP transports: is the process up, can the store be trusted.

Public (no credentials needed, for load balancers), so it says only what an operator needs:
``ok``, the store's status (``ok``, ``unchecked``, ``corrupt``, ``replaced``) and the fix.
``ok`` is false (503) when the store cannot be opened or cannot keep writes.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memory_core.errors import MemoirError
from memory_core.redaction import redact_value
from server.mcp_app.app import MemoirMCPServer
from server.mcp_app.runtime import MemoirRuntime

__all__ = ["add_health_route"]


def add_health_route(app: MemoirMCPServer, runtime: MemoirRuntime) -> None:
    @app.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> Response:
        try:
            memoir = await runtime.memoir()
            health = await runtime.store_health(memoir)
        except MemoirError as error:
            return JSONResponse(
                redact_value({"ok": False, "store": "unavailable", "error": error.to_dict()}),
                status_code=503,
            )
        body = {
            "ok": health.writable,
            "store": health.status,
            "integrity": health.as_dict(),
            "embedder_ready": runtime.embedder_ready(),
            "in_flight": runtime.in_flight,
        }
        return JSONResponse(redact_value(body), status_code=200 if health.writable else 503)
