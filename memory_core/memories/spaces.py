"""Which store scope a (user, space) pair is.

Theoria keys memories by ``user_id`` and ``space`` (a namespace such as "TheoEngine" or a
project). memoir stores every memory of one pair under one :class:`~memory_core.scope.Scope`
of the default schema, ``space:<user>/<space>``, with the user percent-encoded so that the
first ``/`` always separates the two (a space may itself contain slashes, e.g.
``project:/home/me/app``). Everything a space holds (entries, settings, events, tombstones,
the compatibility graph) lives under that scope, so two users or two spaces never see each
other's memories.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from memory_core.errors import InvalidInputError
from memory_core.scope import Scope, validate_scope

__all__ = ["SCOPE_PREFIX", "MemorySpace", "space_of_scope"]

SCOPE_PREFIX = "space:"
_MAX_USER = 200


@dataclass(frozen=True, slots=True)
class MemorySpace:
    """A user's space, validated; :attr:`scope` is where its memories are stored."""

    user: str
    space: str

    def __post_init__(self) -> None:
        user = self.user.strip()
        if not user or len(user) > _MAX_USER or any(ord(c) < 32 for c in user):
            raise InvalidInputError(
                f"invalid user {self.user[:60]!r}",
                hint=f"use a user id of 1 to {_MAX_USER} printable characters",
            )
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "space", validate_scope(self.space))

    @property
    def scope(self) -> Scope:
        """The store scope of this (user, space) pair.

        Raises:
            InvalidInputError: the pair is too long to be a scope.
        """
        return Scope.of(f"{SCOPE_PREFIX}{quote(self.user, safe='')}/{self.space}")

    def as_dict(self) -> dict[str, str]:
        return {"user": self.user, "space": self.space}


def space_of_scope(scope_key: str) -> MemorySpace | None:
    """The (user, space) a stored scope key belongs to, or None for other scopes."""
    if not scope_key.startswith(SCOPE_PREFIX) or "/" not in scope_key:
        return None
    user, space = scope_key.removeprefix(SCOPE_PREFIX).split("/", 1)
    try:
        return MemorySpace(unquote(user), space)
    except InvalidInputError:
        return None
