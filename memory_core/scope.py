"""Scopes: which project, space or user a read or write belongs to.

A :class:`Scope` is a value checked against the store's :class:`ScopeSchema`, never a bare
string. The default schema has one field, ``scope``, whose values are ``project:<absolute path
of the project root>``, ``global`` (shared by every project on the store) or a short name. The
memory layer declares its own fields (``user_id``, ``agent_id``…; DESIGN §9), in order.

Every table stores a scope's canonical :attr:`Scope.key` in its ``scope`` column (the prefix of
every composite index), so one-field and many-field stores share the same tuned SQL; a backend
may add one real column per field for cross-scope selectors. An unscoped write is refused by
the adapters, never guessed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memory_core.errors import InvalidInputError

__all__ = [
    "DEFAULT_SCOPE_SCHEMA",
    "GLOBAL",
    "GLOBAL_SCOPE",
    "Scope",
    "ScopeLike",
    "ScopeSchema",
    "as_scope",
    "find_project_root",
    "is_never_a_project",
    "project_scope",
    "resolve_scope",
    "validate_scope",
]

GLOBAL_SCOPE = "global"
_MAX_SCOPE = 512
_DEFAULT_FIELD = "scope"


def validate_scope(scope: str) -> str:
    """Check one caller-given scope value and return it stripped.

    Raises:
        InvalidInputError: empty, too long, or with control characters.
    """
    value = scope.strip()
    if not value or len(value) > _MAX_SCOPE or any(ord(c) < 32 for c in value):
        raise InvalidInputError(
            f"invalid scope {scope[:60]!r}",
            hint=f"use 'global', 'project:/abs/path', or a name under {_MAX_SCOPE} characters",
        )
    return value


@dataclass(frozen=True, slots=True)
class ScopeSchema:
    """The ordered scope fields of a store (one ``scope`` field by default)."""

    fields: tuple[str, ...] = (_DEFAULT_FIELD,)

    def __post_init__(self) -> None:
        if not self.fields or len(set(self.fields)) != len(self.fields):
            raise InvalidInputError(
                f"invalid scope fields {self.fields!r}",
                hint="declare at least one field, each name once",
            )
        for name in self.fields:
            if not name.isidentifier() or not name.islower() or len(name) > 48:
                raise InvalidInputError(
                    f"invalid scope field name {name[:60]!r}",
                    hint="use a lower-case identifier of at most 48 characters, e.g. user_id",
                )

    @property
    def is_default(self) -> bool:
        return self.fields == (_DEFAULT_FIELD,)

    @property
    def schema_hash(self) -> str:
        """A short hash of the field list (stored in ``meta``; a reopen must match it)."""
        return hashlib.sha256("\x1f".join(self.fields).encode()).hexdigest()[:16]

    def scope(self, values: Mapping[str, str] | str) -> Scope:
        """A :class:`Scope` of this schema from a field mapping (or one value, default schema).

        Raises:
            InvalidInputError: a field is missing, unknown, empty or malformed.
        """
        if isinstance(values, str):
            if not self.is_default:
                raise InvalidInputError(
                    f"a scope of this store needs the fields {list(self.fields)}, "
                    f"got the single value {values[:60]!r}",
                    hint="pass a mapping with every scope field",
                )
            values = {_DEFAULT_FIELD: values}
        unknown = sorted(set(values) - set(self.fields))
        missing = [f for f in self.fields if f not in values]
        if unknown or missing:
            raise InvalidInputError(
                f"scope fields do not match the store's schema {list(self.fields)}: "
                f"missing {missing}, unknown {unknown}",
                hint="pass exactly the fields the store was created with",
            )
        pairs = tuple((name, validate_scope(str(values[name]))) for name in self.fields)
        if self.is_default:
            key = pairs[0][1]
        else:
            key = json.dumps(dict(pairs), ensure_ascii=False, separators=(",", ":"))
        if len(key) > 4 * _MAX_SCOPE:
            raise InvalidInputError(
                f"scope of {len(key)} characters is too long",
                hint=f"keep scope values under {_MAX_SCOPE} characters",
            )
        return Scope(key=key, fields=pairs)

    def from_key(self, key: str) -> Scope:
        """The :class:`Scope` whose :attr:`Scope.key` is ``key`` (as read from a row)."""
        if self.is_default:
            return Scope(key=key, fields=((_DEFAULT_FIELD, key),))
        raw = json.loads(key)
        return self.scope({str(k): str(v) for k, v in raw.items()})


DEFAULT_SCOPE_SCHEMA = ScopeSchema()


@dataclass(frozen=True, slots=True, order=True)
class Scope:
    """A validated scope: its canonical ``key`` (the stored value) and its field values."""

    key: str
    fields: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, value: str | Scope) -> Scope:
        """A default-schema scope from its one value (a Scope passes through).

        Raises:
            InvalidInputError: empty, too long, or with control characters.
        """
        if isinstance(value, Scope):
            return value
        return DEFAULT_SCOPE_SCHEMA.scope(value)

    def get(self, field: str) -> str:
        for name, value in self.fields:
            if name == field:
                return value
        raise KeyError(field)

    def as_dict(self) -> dict[str, str]:
        return dict(self.fields)

    def __str__(self) -> str:
        return self.key


GLOBAL = Scope.of(GLOBAL_SCOPE)

ScopeLike = Scope | str
"""What the public API accepts: a :class:`Scope`, or one value of the default schema."""


def as_scope(value: ScopeLike) -> Scope:
    """``value`` as a :class:`Scope` (validated when given as a string).

    Raises:
        InvalidInputError: an invalid scope string.
    """
    return value if isinstance(value, Scope) else Scope.of(value)


def is_never_a_project(folder: Path, *, home: Path | None = None) -> bool:
    """A home folder or the filesystem root is never a project, even with a ``.git`` (a
    dotfiles repository): Cursor and others start servers with the home folder as cwd."""
    folder = folder.expanduser().resolve()
    if folder == Path(folder.anchor):
        return True
    try:
        home_folder = (home or Path.home()).resolve()
    except (RuntimeError, KeyError):  # no home directory for this user
        return False
    return folder == home_folder


def find_project_root(start: Path) -> Path:
    """The nearest folder holding ``.git`` from ``start`` upward, else ``start`` itself
    (a home folder's dotfiles repository is not a project root)."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists() and not is_never_a_project(folder):
            return folder
    return start


def project_scope(root: Path) -> str:
    return f"project:{root.resolve()}"


def resolve_scope(
    explicit: str | None, *, workspace: str | None, cwd: Path, home: Path | None = None
) -> str:
    """The scope of a command: explicit > configured workspace > git root of ``cwd`` (else
    ``cwd`` itself).

    Raises:
        InvalidInputError: the scope is invalid, or it would fall back to a home folder (or
            ``/``), which never becomes a project.
    """
    if explicit:
        return validate_scope(explicit)
    if workspace:
        return project_scope(Path(workspace).expanduser())
    root = find_project_root(cwd)
    if is_never_a_project(root, home=home):
        raise InvalidInputError(
            f"no project scope: the working directory {root} is a home folder or the "
            "filesystem root, which is never a project",
            hint="run the command inside the project, pass --scope (e.g. --scope global), or "
            "set server.workspace in memoir.toml",
        )
    return project_scope(root)
