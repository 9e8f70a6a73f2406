"""Who can reach the HTTP server: Host / Origin checks on every address, and no unauthenticated
server on a network address unless the operator names the risk.

The non-loopback cases bind this machine's own network address (found with ``ip``); the
server is reached there from this same machine, exactly as a colleague's machine would.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp_testkit import (
    RunningServer,
    serve_command,
    server_env,
    start_http_server,
    stop_http_server,
)
from trust_kit import Token, git_project, http_get, mcp_client, non_loopback_address, write_config

pytestmark = pytest.mark.anyio

_WAIT_S = 60
ADDRESS = non_loopback_address()
needs_address = pytest.mark.skipif(ADDRESS is None, reason="this machine has no non-loopback IPv4")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def loopback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("loopback")
    config = write_config(
        root / "etc",
        extra='[server]\nallowed_hosts = ["memoir.internal:*"]\n'
        'allowed_origins = ["https://console.example.org"]',
    )
    server = start_http_server(root, "http", workspaces=(git_project(root / "p"),), config=config)
    yield server
    assert stop_http_server(server) == 0, "".join(server.stderr)


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Token]]:
    if ADDRESS is None:
        pytest.skip("this machine has no non-loopback IPv4")
    root = tmp_path_factory.mktemp("network")
    project = git_project(root / "p")
    token = Token.make("erin", project)
    config = write_config(root / "etc", tokens=(token,))
    server = start_http_server(root, "http", workspaces=(project,), host=ADDRESS, config=config)
    yield server, token
    assert stop_http_server(server) == 0, "".join(server.stderr)


def _post(url: str, **headers: str) -> int:
    return http_get(url, {"Accept": "application/json", **headers}, method="POST").status


def test_loopback_refuses_a_foreign_host_and_origin(loopback: RunningServer) -> None:
    port = loopback.base.rsplit(":", 1)[1]
    assert http_get(f"{loopback.base}/healthz", {"Host": "evil.example"}).status == 421
    assert _post(loopback.mcp_url, Host=f"attacker.test:{port}") == 421
    assert _post(loopback.mcp_url, Origin="https://evil.example") == 403
    assert _post(loopback.mcp_url, Origin="http://localhost.evil.example:80") == 403
    # What the server names itself, and what the operator added, pass the guard.
    assert http_get(f"{loopback.base}/healthz", {"Host": f"localhost:{port}"}).status == 200
    assert http_get(f"{loopback.base}/healthz", {"Host": "memoir.internal:443"}).status == 200
    ok = http_get(f"{loopback.base}/healthz", {"Origin": "https://console.example.org"})
    assert ok.status == 200


@needs_address
def test_a_network_address_checks_host_origin_then_the_token(
    network: tuple[RunningServer, Token],
) -> None:
    server, _ = network
    port = server.base.rsplit(":", 1)[1]
    assert _post(server.mcp_url, Host=f"evil.example:{port}") == 421
    assert _post(server.mcp_url, Origin="https://evil.example") == 403
    assert _post(server.mcp_url) == 401  # right host, no token
    assert _post(server.mcp_url, Authorization="Bearer wrong") == 401
    assert http_get(f"{server.base}/healthz").status == 200


@needs_address
async def test_a_network_address_serves_a_client_with_its_token(
    network: tuple[RunningServer, Token],
) -> None:
    server, token = network
    with anyio.fail_after(_WAIT_S):
        async with mcp_client(server.mcp_url, token=token.value) as client:
            result = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
    assert not result.is_error, result.content[0].text


def _serve(tmp_path: Path, host: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = serve_command(
        f"sqlite:///{tmp_path / 'memoir.db'}", "--transport", "http", "--host", host, *extra
    )
    return subprocess.run(
        command,
        env=server_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=_WAIT_S,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("host", ["0.0.0.0", *([ADDRESS] if ADDRESS else [])])
def test_a_network_address_without_authentication_is_refused(tmp_path: Path, host: str) -> None:
    done = _serve(tmp_path, host, "--port", "0")
    assert done.returncode != 0
    assert "refusing to serve" in done.stderr and "--allow-unauthenticated-network" in done.stderr
    assert "Traceback" not in done.stderr


@needs_address
def test_the_risk_flag_serves_without_authentication_and_says_so(tmp_path: Path) -> None:
    assert ADDRESS is not None
    server = start_http_server(
        tmp_path, "http", host=ADDRESS, extra_args=("--allow-unauthenticated-network",)
    )
    try:
        assert http_get(f"{server.base}/healthz").status == 200
        assert any("WITHOUT authentication" in line for line in server.stderr)
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)
