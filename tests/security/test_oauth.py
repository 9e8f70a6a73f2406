"""The MCP authorization profile: memoir as an OAuth 2.0 protected resource.

A small authorization server runs here over real HTTP (its RFC 7662 introspection endpoint
answers for a fixed set of tokens); memoir is configured with it in ``memoir.toml``, publishes
its RFC 9728 Protected Resource Metadata, points clients at it in ``WWW-Authenticate``, and
validates every bearer token through introspection (active, unexpired, issued for this server,
with the required scope) via the SDK's resource-server middleware.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp_testkit import RunningServer, start_http_server, stop_http_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from trust_kit import git_project, http_get, mcp_client, write_config

pytestmark = pytest.mark.anyio

_WAIT_S = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AuthorizationServer:
    """An introspection endpoint over real HTTP, in a thread of this process."""

    def __init__(self, tokens: dict[str, dict[str, Any]]) -> None:
        self.tokens = tokens
        self.calls = 0

        async def introspect(request: Request) -> JSONResponse:
            self.calls += 1
            form = await request.form()
            return JSONResponse(self.tokens.get(str(form.get("token")), {"active": False}))

        app = Starlette(routes=[Route("/introspect", introspect, methods=["POST"])])
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> AuthorizationServer:
        self.thread.start()
        deadline = time.monotonic() + _WAIT_S
        while not self.server.started:  # bounded: started flips once it listens
            assert time.monotonic() < deadline, "authorization server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(_WAIT_S)
        self.sock.close()


@pytest.fixture(scope="module")
def protected(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningServer, str, Path]]:
    root = tmp_path_factory.mktemp("oauth")
    project = git_project(root / "alpha")
    port = _free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    now = int(time.time())
    good = {"active": True, "aud": resource, "sub": "user-a", "scope": "memoir", "exp": now + 3600}
    tokens = {
        "tok-good": good,
        "tok-other-audience": {**good, "aud": "https://other.example/mcp"},
        "tok-inactive": {**good, "active": False},
        "tok-expired": {**good, "exp": now - 10},
        "tok-no-scope": {**good, "scope": "profile"},
        "tok-unmapped": {**good, "sub": "user-z"},
    }
    with AuthorizationServer(tokens) as issuer:
        config = write_config(
            root / "etc",
            extra=f"""
[server.auth.oauth]
issuer_url = "{issuer.url}"
introspection_url = "{issuer.url}/introspect"
resource_url = "{resource}"
required_scopes = ["memoir"]

[server.auth.oauth.workspaces]
user-a = ["{project}"]
""",
        )
        server = start_http_server(
            root, "http", workspaces=(project,), config=config, extra_args=("--port", str(port))
        )
        try:
            yield server, issuer.url, project
        finally:
            assert stop_http_server(server) == 0, "".join(server.stderr)


def test_protected_resource_metadata_names_the_authorization_server(
    protected: tuple[RunningServer, str, Path],
) -> None:
    server, issuer, _ = protected
    metadata = http_get(f"{server.base}/.well-known/oauth-protected-resource/mcp")
    assert metadata.status == 200
    body = metadata.json()
    assert body["resource"] == server.mcp_url
    assert [a.rstrip("/") for a in body["authorization_servers"]] == [issuer]
    refused = http_get(server.mcp_url, {"Accept": "application/json"}, method="POST")
    assert refused.status == 401
    assert "/.well-known/oauth-protected-resource/mcp" in refused.headers["www-authenticate"]


@pytest.mark.parametrize(
    ("token", "status"),
    [
        ("tok-other-audience", 401),
        ("tok-inactive", 401),
        ("tok-expired", 401),
        ("tok-never-issued", 401),
        ("tok-no-scope", 403),
    ],
)
def test_tokens_that_are_not_for_this_server_are_refused(
    protected: tuple[RunningServer, str, Path], token: str, status: int
) -> None:
    server, _, _ = protected
    answer = http_get(f"{server.base}/v1/whoami", {"Authorization": f"Bearer {token}"})
    assert answer.status == status


async def test_an_introspected_token_reaches_its_project(
    protected: tuple[RunningServer, str, Path],
) -> None:
    server, _, project = protected
    me = http_get(f"{server.base}/v1/whoami", {"Authorization": "Bearer tok-good"}).json()
    assert me["workspaces"] == [str(project)] and me["scope"] == f"project:{project}"
    with anyio.fail_after(_WAIT_S):
        async with mcp_client(server.mcp_url, token="tok-good", roots=(Path("/"),)) as client:
            result = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
    assert not result.is_error, result.content[0].text
    assert result.meta["io.memoir/scope"] == f"project:{project}"


async def test_a_principal_outside_the_mapping_gets_no_project(
    protected: tuple[RunningServer, str, Path],
) -> None:
    server, _, _ = protected
    me = http_get(f"{server.base}/v1/whoami", {"Authorization": "Bearer tok-unmapped"}).json()
    assert me["workspaces"] == [] and me["scope"] is None
    with anyio.fail_after(_WAIT_S):
        async with mcp_client(server.mcp_url, token="tok-unmapped") as client:
            result = await client.call_tool("ingest", {"text": "a fact for nobody"})
    assert result.is_error and "no project scope" in result.content[0].text
