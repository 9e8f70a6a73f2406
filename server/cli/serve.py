"""``memoir serve``: run the MCP server (stdio by default; SSE or streamable HTTP on request).

The MCP SDK is imported inside the command only: every other ``memoir`` command stays free of
its half-second import.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import click

from memory_core.errors import MemoirError
from server.cli.main import CliState, _version, pass_state
from server.cli.output import fail

__all__ = ["register"]


def _with_server_settings(state: CliState, **updates: Any) -> Any:
    server = state.settings.server.model_copy(
        update={k: v for k, v in updates.items() if v is not None}
    )
    return state.settings.model_copy(update={"server": server})


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _print_config(
    transport: str,
    host: str,
    port: int,
    db: str | None,
    workspace: str | None,
    token_env: str | None = None,
) -> None:
    from server.mcp_app.client_config import (
        claude_code_command,
        http_entry,
        http_url,
        mcp_servers_json,
        stdio_entry,
    )

    if transport == "stdio":
        click.echo("memoir MCP server on stdio. Client configuration:", err=True)
        click.echo(mcp_servers_json(stdio_entry(db_url=db, workspace=workspace)), err=True)
        click.echo(f"Claude Code: {claude_code_command()}", err=True)
        return
    url = http_url(host, port, transport)
    click.echo(f"memoir MCP server ({transport}) at {url}", err=True)
    click.echo("Client configuration (Cursor, Cline, Claude Code .mcp.json):", err=True)
    click.echo(
        mcp_servers_json(http_entry(url, transport=transport, token_env=token_env)), err=True
    )
    click.echo(
        f"Claude Code: {claude_code_command(url=url, transport=transport, token_env=token_env)}",
        err=True,
    )
    click.echo(
        f"MCP Inspector: npx @modelcontextprotocol/inspector --cli {url} "
        f"--transport {transport} --method tools/list",
        err=True,
    )


def _preflight_http(settings: Any) -> None:
    """Refuse, before serving, what ``build_http_app`` would refuse (a clean exit, no trace)."""
    from server.mcp_app.auth import build_verifier
    from server.mcp_app.http_guard import check_bind

    try:
        verifier = build_verifier(settings.server.auth)
        check_bind(settings, settings.server.host, has_credentials=verifier is not None)
    except MemoirError as error:
        fail(error, as_json=False)


def register(cli: click.Group) -> None:
    """Add ``serve`` to the ``memoir`` command group."""

    @cli.command()
    @click.option(
        "--transport",
        type=click.Choice(["stdio", "sse", "http"]),
        default=None,
        help="stdio (default; what clients spawn), sse, or http (streamable HTTP).",
    )
    @click.option("--host", default=None, help="Address for sse/http (default 127.0.0.1).")
    @click.option(
        "--port",
        type=int,
        default=None,
        help="Port for sse/http (default 8765; 0 picks a free one).",
    )
    @click.option(
        "--scope", "scope", default=None, help="Serve this one scope, whatever the client's roots."
    )
    @click.option(
        "--workspace",
        "workspaces",
        type=click.Path(file_okay=False, path_type=Path),
        multiple=True,
        help="A project folder the server may read (repeat for several; a client's "
        "${workspaceFolder} works). MCP roots can only narrow these. Default: the git root "
        "of the working directory (never a home folder).",
    )
    @click.option(
        "--allow-unauthenticated-network",
        "allow_unauthenticated_network",
        is_flag=True,
        default=None,
        help="Serve a non-loopback --host with no authentication: anyone who can reach it can "
        "read and change the store. Only behind a firewall you trust.",
    )
    @click.option(
        "--extra-tools", is_flag=True, default=None, help="Also expose list_rules and search."
    )
    @click.option(
        "--print-config", is_flag=True, help="Print the URL and a client config snippet to stderr."
    )
    @pass_state
    def serve(
        state: CliState,
        transport: str | None,
        host: str | None,
        port: int | None,
        scope: str | None,
        workspaces: tuple[Path, ...],
        allow_unauthenticated_network: bool | None,
        extra_tools: bool | None,
        print_config: bool,
    ) -> None:
        """Run the MCP server (tools, resources, prompts) for coding agents."""
        from server.mcp_app.app import build_server
        from server.mcp_app.runtime import MemoirRuntime
        from server.mcp_app.scoping import ScopeDefaults, git_root_of
        from server.mcp_app.transports import ensure_port_free
        from server.mcp_app.transports import serve as run_server

        folders = [str(w.expanduser().resolve()) for w in workspaces]
        settings = _with_server_settings(
            state,
            transport=transport,
            host=host,
            port=port,
            workspace=folders[0] if folders else None,
            workspaces=tuple(folders[1:]) if folders else None,
            allow_unauthenticated_network=allow_unauthenticated_network,
            extra_tools=extra_tools,
        )
        if settings.server.port == 0 and settings.server.transport != "stdio":
            # Port 0: pick a free port now, so --print-config shows the real URL.
            settings = settings.model_copy(
                update={
                    "server": settings.server.model_copy(
                        update={"port": _free_port(settings.server.host)}
                    )
                }
            )
        cfg = settings.server
        try:
            from memory_core.scope import validate_scope

            explicit = validate_scope(scope) if scope else None
        except MemoirError as error:
            fail(error, as_json=False)
        if cfg.transport != "stdio":
            _preflight_http(settings)
        granted = [w for token in cfg.auth.tokens for w in token.workspaces]
        if cfg.auth.oauth is not None:
            granted += [w for ws in cfg.auth.oauth.workspaces.values() for w in ws]
        defaults = ScopeDefaults(
            explicit_scope=explicit,
            workspace=Path(cfg.workspace).expanduser() if cfg.workspace else None,
            workspaces=tuple(Path(w).expanduser() for w in (*cfg.workspaces, *granted)),
            # Nothing configured: the project the server was started in (never a home folder).
            cwd_root=git_root_of(Path.cwd()),
        )
        if cfg.transport != "stdio":
            try:
                ensure_port_free(cfg.host, cfg.port)
            except MemoirError as error:
                fail(error, as_json=False)
        runtime = MemoirRuntime(settings, state.db, scope_defaults=defaults)
        app = build_server(runtime, version=_version())
        if print_config:
            authenticated = bool(cfg.auth.tokens) or cfg.auth.oauth is not None
            _print_config(
                cfg.transport,
                cfg.host,
                cfg.port,
                state.db,
                cfg.workspace,
                token_env="MEMOIR_TOKEN" if authenticated else None,
            )
        try:
            anyio.run(lambda: run_server(app, runtime, cfg.transport, host=cfg.host, port=cfg.port))
        except KeyboardInterrupt:  # a second Ctrl-C during the drain
            sys.exit(130)
