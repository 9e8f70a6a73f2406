"""SSE and streamable HTTP under uvicorn, with memoir's own graceful shutdown.

uvicorn's signal handling re-raises SIGTERM once it has stopped, which kills the process before
the store is drained and closed; here uvicorn's handlers are off and a signal receiver asks it to
exit instead, so ``serve`` returns and the caller closes the store.

Every route sits behind :func:`server.mcp_app.http_guard.guard_app` (Host / Origin, body size,
credentials); :func:`build_http_app` is that whole application, for tests to serve as well.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import anyio
import structlog
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings

from server.mcp_app.app import MemoirMCPServer
from server.mcp_app.auth import build_verifier
from server.mcp_app.health import add_health_route
from server.mcp_app.http_guard import check_bind, guard_app
from server.mcp_app.rest import add_rest_routes
from server.mcp_app.runtime import MemoirRuntime

__all__ = ["build_http_app", "serve_http"]

log = structlog.get_logger(__name__)

_GRACE_S = 10  # open SSE / streamable-HTTP streams may not hold shutdown longer than this


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def build_http_app(app: MemoirMCPServer, runtime: MemoirRuntime, *, sse: bool, host: str) -> Any:
    """The ASGI application: MCP over SSE (``/sse``) or streamable HTTP (``/mcp``), ``/healthz``,
    the REST routes and, with OAuth, the Protected Resource Metadata, behind the guards.

    Raises:
        ConfigError: a non-loopback ``host`` without credentials (see ``check_bind``), or an
            unreadable token expiry.
    """
    settings = runtime.settings
    verifier = build_verifier(settings.server.auth)
    check_bind(settings, host, has_credentials=verifier is not None)
    add_health_route(app, runtime)
    add_rest_routes(app, runtime)
    # Host / Origin are checked by the guard on every address; the SDK keeps its Content-Type
    # check and its own body limit (the guard's, equal, answers first).
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    limit = settings.limits.request_bytes
    starlette_app = (
        app.sse_app(host=host, transport_security=security, max_request_body_size=limit)
        if sse
        else app.streamable_http_app(
            host=host, transport_security=security, max_request_body_size=limit
        )
    )
    metadata_url = None
    oauth = settings.server.auth.oauth
    if oauth is not None:
        from mcp.server.auth.routes import (
            build_resource_metadata_url,
            create_protected_resource_routes,
        )
        from pydantic import AnyHttpUrl

        resource = AnyHttpUrl(oauth.resource_url)
        metadata_url = build_resource_metadata_url(resource)
        starlette_app.router.routes.extend(
            create_protected_resource_routes(
                resource_url=resource,
                authorization_servers=[AnyHttpUrl(oauth.issuer_url)],
                scopes_supported=list(oauth.required_scopes) or None,
                resource_name="memoir",
            )
        )
    return guard_app(
        starlette_app, settings, host=host, verifier=verifier, resource_metadata_url=metadata_url
    )


async def serve_http(
    app: MemoirMCPServer, runtime: MemoirRuntime, *, sse: bool, host: str, port: int
) -> None:
    """Serve ``app`` over SSE (``/sse``) or streamable HTTP (``/mcp``) until SIGINT / SIGTERM."""
    asgi_app = build_http_app(app, runtime, sse=sse, host=host)
    level = runtime.settings.logging.level
    config = uvicorn.Config(
        asgi_app,
        host=host,
        port=port,
        log_level=level,
        log_config=None,  # no handlers of its own: its lines go through memoir's (redacted)
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
