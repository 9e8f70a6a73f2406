"""Who is calling, as memoir's adapters tell the memory layer's authorisation hook (the
``principal`` of ``memorize`` / ``retrieve`` / ``evolve``).

Every principal is a plain mapping, so a hook named by dotted path in a layer file reads it
without importing memoir:

- ``id``: the caller's name: the token's name (or OAuth client id) over authenticated HTTP;
  ``local:<OS user>`` over stdio and in the CLI (or the CLI's ``--principal``); ``None`` over
  HTTP without authentication;
- ``transport``: ``"http"``, ``"stdio"`` or ``"cli"``;
- ``authenticated``: True only when a verified credential names the caller (HTTP with tokens or
  OAuth). A stdio or CLI caller is whoever runs the process: the OS user, as asserted by the
  process, not checked by memoir;
- ``subject``: the OAuth subject, when the token carries one.
"""

from __future__ import annotations

import getpass
import os
from typing import Any, Literal

__all__ = ["local_principal", "os_user", "token_principal"]


def os_user() -> str:
    """The OS user running this process (its uid when the name cannot be found)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME / USER
        return str(os.getuid())


def local_principal(transport: Literal["stdio", "cli"], name: str | None = None) -> dict[str, Any]:
    """The principal of a local caller: ``name`` as given (the CLI's ``--principal``), else
    ``local:<OS user>``; never authenticated."""
    return {"id": name or f"local:{os_user()}", "transport": transport, "authenticated": False}


def token_principal(client_id: str | None, subject: str | None = None) -> dict[str, Any]:
    """The principal of an HTTP caller: the verified token's client id (``None``: the server
    has no authentication configured)."""
    principal: dict[str, Any] = {
        "id": client_id,
        "transport": "http",
        "authenticated": client_id is not None,
    }
    if subject:
        principal["subject"] = subject
    return principal
