"""An authorisation hook a layer file names by dotted path (``authorise =
"tests.pipeline.layer_hooks:caller_owns_user_id"``), for the tests of the principal memoir's
MCP tools and CLI pass."""

from __future__ import annotations

import json

from memory_core.pipeline.authorisation import AccessDeniedError, AccessRequest

__all__ = ["caller_owns_user_id"]


def caller_owns_user_id(request: AccessRequest) -> None:
    """Lets a caller use only the ``user_id`` that is its principal's ``id``; a refusal names
    the principal as the hook saw it."""
    principal = request.principal if isinstance(request.principal, dict) else {}
    asked = request.selector.values.get("user_id")
    if asked != principal.get("id"):
        seen = json.dumps(principal, sort_keys=True)
        raise AccessDeniedError("user_id", f"principal {seen} may not use {asked!r}")
