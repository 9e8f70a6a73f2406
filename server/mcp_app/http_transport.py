"""SSE and streamable HTTP under uvicorn, with memoir's own graceful shutdown.

uvicorn's signal handling re-raises SIGTERM once it has stopped, which kills the process before
the store is drained and closed; here uvicorn's handlers are off and a signal receiver asks it to
exit instead, so ``serve`` returns and the caller closes the store.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import anyio
import structlog
import uvicorn

from server.mcp_app.app import MemoirMCPServer
from server.mcp_app.health import add_health_route
from server.mcp_app.runtime import MemoirRuntime

__all__ = ["serve_http"]

log = structlog.get_logger(__name__)

_GRACE_S = 10  # open SSE / streamable-HTTP streams may not hold shutdown longer than this


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_http(
    app: MemoirMCPServer, runtime: MemoirRuntime, *, sse: bool, host: str, port: int
) -> None:
    """Serve ``app`` over SSE (``/sse``) or streamable HTTP (``/mcp``) until SIGINT / SIGTERM."""
    add_health_route(app, runtime)
    starlette_app = app.sse_app(host=host) if sse else app.streamable_http_app(host=host)
    level = runtime.settings.logging.level
    config = uvicorn.Config(
        starlette_app,
        host=host,
        port=port,
        log_level=level,
        access_log=level == "debug",
        timeout_graceful_shutdown=_GRACE_S,
        lifespan="on",
    )
    server = _Uvicorn(config)
    async with anyio.create_task_group() as tg:
        runtime.attach(tg)
        runtime.warm()  # a shared server: nobody waits on its start-up handshake
        tg.start_soon(_exit_on_signal, server)
        await server.serve()
        tg.cancel_scope.cancel()


async def _exit_on_signal(server: Any) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("signal received; stopping", signal=signal.Signals(signum).name)
            server.should_exit = True
            return
