"""``GET /healthz`` on the HTTP transports: is the process up, is the store open."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memory_core.errors import MemoirError
from server.mcp_app.app import MemoirMCPServer
from server.mcp_app.runtime import MemoirRuntime

__all__ = ["add_health_route"]


def add_health_route(app: MemoirMCPServer, runtime: MemoirRuntime) -> None:
    @app.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> Response:
        try:
            await runtime.memoir()
        except MemoirError as error:
            return JSONResponse({"ok": False, "error": error.to_dict()}, status_code=503)
        return JSONResponse(
            {"ok": True, "embedder_ready": runtime.embedder_ready(), "in_flight": runtime.in_flight}
        )
