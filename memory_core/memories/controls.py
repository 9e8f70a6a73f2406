"""Per-space settings and incognito sessions (spec "User Controls & Privacy"). Pure + meta.

A space's state is one JSON value in the store's ``meta`` (key ``memory.space:<scope>``):
``memory_enabled`` (off: nothing is saved or recalled), ``incognito_default`` (sessions start
incognito), an optional ``soft_cap`` override, and the incognito sessions. A session is any
caller-chosen id (an MCP connection, a chat id); calls without one use the space's
``default`` session, which is what the CLI's ``memoir memory incognito start`` toggles.

Incognito means the session neither persists nor retrieves: ``remember`` stores nothing and
``recall`` returns nothing, both saying why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memory_core.errors import InvalidInputError
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.storage.ports import Tx

__all__ = [
    "DEFAULT_SESSION",
    "MAX_SESSIONS",
    "SpaceState",
    "check_session",
    "load_state",
    "save_state",
    "with_session",
]

DEFAULT_SESSION = "default"
MAX_SESSIONS = 256
_MAX_SESSION_CHARS = 200


def _key(scope: Scope) -> str:
    return f"memory.space:{scope.key}"


@dataclass(frozen=True)
class SpaceState:
    memory_enabled: bool = True
    incognito_default: bool = False
    soft_cap: int | None = None
    # session id -> incognito on (True) or explicitly off (False), oldest first.
    sessions: dict[str, bool] = field(default_factory=dict)
    last_retention_at: str | None = None

    def incognito(self, session: str | None) -> bool:
        return self.sessions.get(session or DEFAULT_SESSION, self.incognito_default)

    def as_dict(self) -> dict[str, Any]:
        return {
            "memory_enabled": self.memory_enabled,
            "incognito_default": self.incognito_default,
            "soft_cap": self.soft_cap,
            "sessions": dict(self.sessions),
            "last_retention_at": self.last_retention_at,
        }


def check_session(session: str | None) -> str:
    """A session id as stored (``default`` when none).

    Raises:
        InvalidInputError: empty, too long, or with control characters.
    """
    if session is None:
        return DEFAULT_SESSION
    value = session.strip()
    if not value or len(value) > _MAX_SESSION_CHARS or any(ord(c) < 32 for c in value):
        raise InvalidInputError(
            f"invalid session id {session[:60]!r}",
            hint=f"use 1 to {_MAX_SESSION_CHARS} printable characters, e.g. a chat id",
        )
    return value


def with_session(state: SpaceState, session: str | None, incognito: bool) -> SpaceState:
    """``state`` with ``session`` switched (the oldest sessions go past :data:`MAX_SESSIONS`)."""
    sessions = {k: v for k, v in state.sessions.items() if k != check_session(session)}
    sessions[check_session(session)] = incognito
    while len(sessions) > MAX_SESSIONS:
        sessions.pop(next(iter(sessions)))
    return replace(state, sessions=sessions)


def load_state(tx: Tx, scope: Scope) -> SpaceState:
    raw = tx.meta.get(_key(scope))
    if not raw:
        return SpaceState()
    data = json.loads(raw)
    return SpaceState(
        memory_enabled=bool(data.get("memory_enabled", True)),
        incognito_default=bool(data.get("incognito_default", False)),
        soft_cap=data.get("soft_cap"),
        sessions={str(k): bool(v) for k, v in data.get("sessions", {}).items()},
        last_retention_at=data.get("last_retention_at"),
    )


def save_state(tx: Tx, scope: Scope, state: SpaceState) -> None:
    tx.meta.set(_key(scope), json.dumps(state.as_dict(), sort_keys=True))
