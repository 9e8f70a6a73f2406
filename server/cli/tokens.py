"""``memoir token``: bearer tokens for the HTTP server, configured by their hash only.

``memoir token new NAME`` prints a fresh token once (give it to the client: it goes in an
``Authorization: Bearer …`` header) and the ``[[server.auth.tokens]]`` entry to paste into the
server's ``memoir.toml``, which holds only the token's SHA-256. ``memoir token hash`` hashes a
token read from stdin (to configure one made elsewhere).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

__all__ = ["register", "token_entry"]


def token_entry(name: str, digest: str, workspaces: tuple[str, ...], expires: str | None) -> str:
    """The TOML table for one token (only its hash)."""
    lines = [
        "[[server.auth.tokens]]",
        f"name = {json.dumps(name)}",
        f'sha256 = "{digest}"',
    ]
    if workspaces:
        lines.append("workspaces = [" + ", ".join(json.dumps(w) for w in workspaces) + "]")
    if expires:
        lines.append(f"expires = {json.dumps(expires)}")
    return "\n".join(lines)


def register(cli: click.Group) -> None:
    """Add ``token`` to the ``memoir`` command group."""

    @cli.group()
    def token() -> None:
        """Bearer tokens for `memoir serve --transport http|sse`."""

    @token.command("new")
    @click.argument("name")
    @click.option(
        "--workspace",
        "workspaces",
        multiple=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="A project folder this token may use (repeat; default: every server workspace).",
    )
    @click.option("--expires", help="RFC 3339 time after which it is refused (e.g. 2027-01-31Z).")
    def new(name: str, workspaces: tuple[Path, ...], expires: str | None) -> None:
        """Make a token: the token on stdout (once), its config entry on stderr."""
        from server.mcp_app.auth import hash_token, new_token

        secret = new_token()
        folders = tuple(str(w.expanduser().resolve()) for w in workspaces)
        # The token itself must reach the user: written past the redacting stdout on purpose.
        raw = sys.__stdout__ or sys.stdout
        raw.write(secret + "\n")
        raw.flush()
        click.echo(
            "# add to the server's memoir.toml (it holds only the hash):\n"
            + token_entry(name, hash_token(secret), folders, expires),
            err=True,
        )

    @token.command("hash")
    def hash_command() -> None:
        """Print the SHA-256 to configure for a token read from stdin."""
        from server.mcp_app.auth import hash_token

        value = sys.stdin.readline().strip()
        if not value:
            raise click.UsageError('pass the token on stdin: echo "$TOKEN" | memoir token hash')
        click.echo(hash_token(value))
