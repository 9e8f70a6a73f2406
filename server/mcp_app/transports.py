"""Running the server: stdio (what clients spawn), SSE and streamable HTTP.

Stdout carries nothing but the protocol (the SDK diverts fd 1 to stderr while stdio serves, and
logging always goes to stderr). Shutdown is graceful on SIGINT, SIGTERM and stdin close: new
calls are refused, running calls finish (bounded), then the store closes; every write is a
committed transaction, so nothing acknowledged is lost.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import socket
import sys
import threading
from typing import Any, Literal

import anyio
import structlog
from anyio import CancelScope

from memory_core.errors import ConfigError
from server.mcp_app.app import MemoirMCPServer
from server.mcp_app.oversize import PREFIX_BYTES, stand_in_line
from server.mcp_app.runtime import MemoirRuntime

__all__ = ["DRAIN_S", "StdinLines", "Transport", "ensure_port_free", "serve"]

log = structlog.get_logger(__name__)

Transport = Literal["stdio", "sse", "http"]

DRAIN_S = 10.0


def ensure_port_free(host: str, port: int) -> None:
    """Fail before anything is printed or opened when ``host:port`` is taken.

    Raises:
        ConfigError: the port is in use (names it, and how to pick another).
    """
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # The same option uvicorn sets: a port left in TIME_WAIT by a stopped server is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise ConfigError(
                    f"cannot listen on {host}:{port}: {exc.strerror}",
                    hint="check server.host / --host (an address of this machine)",
                ) from exc
            raise ConfigError(
                f"port {port} on {host} is already in use (another memoir or another server)",
                hint=f"stop that server, or pick another port: `PORT={port + 1} make run`, "
                f"`memoir serve --port {port + 1}`, or --port 0 for any free one",
            ) from exc


async def serve(
    app: MemoirMCPServer,
    runtime: MemoirRuntime,
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
) -> None:
    """Serve ``app`` until the client goes away or a signal arrives, then close the store."""
    try:
        if transport == "stdio":
            await _serve_stdio(app, runtime)
        else:
            from server.mcp_app.http_transport import serve_http

            await serve_http(app, runtime, sse=transport == "sse", host=host, port=port)
    finally:
        with anyio.CancelScope(shield=True):
            await runtime.aclose(drain_timeout=DRAIN_S)
        log.info("server stopped", transport=transport)


class StdinLines:
    """Lines of stdin, read by a daemon thread with plain ``os.read`` calls.

    The SDK's default reader blocks in a worker thread that cancellation cannot interrupt (and
    that interpreter exit waits for), so a SIGTERM would hang until the client closed stdin.
    A daemon thread on a raw descriptor (no buffered object whose lock could be held at exit)
    feeding an asyncio queue lets a signal stop the server at once.
    """

    def __init__(self, fd: int, max_line_bytes: int = 4 * 1024 * 1024) -> None:
        self._fd = os.dup(fd)
        self._max = max_line_bytes
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._pump, args=(loop,), name="stdin", daemon=True).start()

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        pending = b""
        oversized: bytes | None = None  # first bytes of a line over the limit, rest dropped
        try:
            while chunk := os.read(self._fd, 1 << 16):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                if oversized is not None and lines:  # the oversized line ends here
                    self._refuse(loop, oversized)
                    oversized, lines = None, lines[1:]
                for raw in lines:
                    if len(raw) > self._max:
                        self._refuse(loop, raw[:PREFIX_BYTES])
                        continue
                    loop.call_soon_threadsafe(
                        self._queue.put_nowait, raw.decode("utf-8", "replace")
                    )
                if len(pending) > self._max:  # never hold more than the limit in memory
                    oversized = oversized or pending[:PREFIX_BYTES]
                    pending = b""
            if pending:
                loop.call_soon_threadsafe(
                    self._queue.put_nowait, pending.decode("utf-8", "replace")
                )
            loop.call_soon_threadsafe(self._queue.put_nowait, None)
        except (RuntimeError, OSError):  # the loop closed first, or stdin went away
            return

    def _refuse(self, loop: asyncio.AbstractEventLoop, prefix: bytes) -> None:
        line = stand_in_line(prefix, self._max)
        log.warning("oversized request refused", limit=self._max, answered=line is not None)
        if line is not None:
            loop.call_soon_threadsafe(self._queue.put_nowait, line)

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        line = await self._queue.get()
        if line is None:
            raise StopAsyncIteration
        return line


async def _serve_stdio(app: MemoirMCPServer, runtime: MemoirRuntime) -> None:
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    lowlevel = app._lowlevel_server  # run_stdio_async takes no notification options
    options = lowlevel.create_initialization_options(NotificationOptions(resources_changed=True))
    stdin: Any = StdinLines(sys.stdin.fileno(), runtime.settings.limits.request_bytes)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, runtime, tg.cancel_scope)
        runtime.attach(tg)
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, options)
        log.info("stdin closed")
        tg.cancel_scope.cancel()


async def _stop_on_signal(runtime: MemoirRuntime, scope: CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("signal received; draining", signal=signal.Signals(signum).name)
            await runtime.aclose(drain_timeout=DRAIN_S)
            scope.cancel()
            return
