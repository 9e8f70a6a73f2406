"""Helpers for the security, fuzz and fault suites: real servers with real credentials.

Servers are ``memoir serve`` subprocesses (``mcp_testkit.start_http_server``) configured by a
``memoir.toml`` holding token hashes, exactly as an operator would write it; clients are the
MCP SDK's, over real HTTP / SSE / stdio, sending real ``Authorization`` headers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_testkit import make_project, roots_callback

from server.cli.tokens import token_entry
from server.mcp_app.auth import hash_token, new_token

__all__ = [
    "HttpAnswer",
    "Token",
    "git_project",
    "http_get",
    "mcp_client",
    "non_loopback_address",
    "write_config",
]


@dataclass(frozen=True)
class Token:
    name: str
    value: str
    workspaces: tuple[Path, ...] = ()
    expires: str | None = None

    @classmethod
    def make(cls, name: str, *workspaces: Path, expires: str | None = None) -> Token:
        return cls(name, new_token(), tuple(workspaces), expires)

    def toml(self) -> str:
        return token_entry(
            self.name, hash_token(self.value), tuple(str(w) for w in self.workspaces), self.expires
        )


def git_project(root: Path, rules: tuple[str, ...] = ("api-design.md",)) -> Path:
    """A project folder with rule documents and a ``.git`` folder (a real project root)."""
    make_project(root, rules)
    (root / ".git").mkdir(exist_ok=True)
    return root.resolve()


def write_config(folder: Path, *, tokens: tuple[Token, ...] = (), extra: str = "") -> Path:
    """A ``memoir.toml`` with the tokens' hashes (never the tokens) and ``extra`` TOML."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "memoir.toml"
    body = [extra.strip()] if extra.strip() else []
    body += [t.toml() for t in tokens]
    path.write_text("\n\n".join(body) + "\n", encoding="utf-8")
    return path


def mcp_client(
    url: str,
    *,
    token: str | None = None,
    roots: tuple[Path, ...] = (),
    sse: bool = False,
    headers: dict[str, str] | None = None,
) -> Client:
    """The SDK client over streamable HTTP (or SSE), with a bearer token and roots."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    transport: Any = (
        sse_client(url, headers=sent)
        if sse
        else streamable_http_client(url, http_client=create_mcp_http_client(headers=sent))
    )
    kwargs: dict[str, Any] = {"mode": "legacy"}
    if roots:
        kwargs["list_roots_callback"] = roots_callback(*roots)
    return Client(transport, **kwargs)


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def http_get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> HttpAnswer:
    """One plain HTTP request (urllib: nothing shared with the SDK's client)."""
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return HttpAnswer(
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read().decode(),
            )
    except urllib.error.HTTPError as error:
        return HttpAnswer(
            error.code, {k.lower(): v for k, v in error.headers.items()}, error.read().decode()
        )


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (None when there is none)."""
    if shutil.which("ip") is None:
        return None
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            return parts[parts.index("inet") + 1].split("/")[0]
    return None
