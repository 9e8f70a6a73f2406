"""Database URLs: ``sqlite:///path``, ``postgresql://…``, ``mysql://…``.

A URL is parsed once into a :class:`DatabaseURL`; everything that shows a URL to a person uses
:meth:`DatabaseURL.redacted` so a password never reaches a log or an error message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from memory_core.errors import ConfigError

__all__ = ["Backend", "DatabaseURL", "parse_database_url"]

Backend = Literal["sqlite", "postgresql", "mysql"]

_SCHEMES: dict[str, Backend] = {
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}


@dataclass(frozen=True)
class DatabaseURL:
    """A parsed connection string."""

    backend: Backend
    raw: str
    path: Path | None = None  # sqlite only; None means in-memory
    host: str | None = None
    port: int | None = None
    user: str | None = None
    password: str | None = None
    database: str | None = None

    def redacted(self) -> str:
        """The URL with any password replaced by ``***``."""
        if self.password is None:
            return self.raw
        parts = urlsplit(self.raw)
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))

    @property
    def is_memory(self) -> bool:
        return self.backend == "sqlite" and self.path is None


def parse_database_url(url: str) -> DatabaseURL:
    """Parse ``url``; a bare filesystem path is taken as a SQLite file.

    Raises:
        ConfigError: unknown scheme or a URL that names no database.
    """
    text = url.strip()
    if not text:
        raise ConfigError("empty database URL", hint="use sqlite:///path/to/memoir.db")
    if "://" not in text:
        # A plain path is the friendliest way to say "this SQLite file".
        return DatabaseURL(
            "sqlite", f"sqlite:///{Path(text).expanduser()}", Path(text).expanduser()
        )
    scheme = text.split("://", 1)[0].lower().split("+", 1)[0]
    backend = _SCHEMES.get(scheme)
    if backend is None:
        raise ConfigError(
            f"unsupported database URL scheme {scheme!r} in {text.split('@')[-1]!r}",
            hint="use sqlite:///path/to/memoir.db, postgresql://user@host:5432/db or "
            "mysql://user@host:3306/db",
        )
    if backend == "sqlite":
        rest = text.split("://", 1)[1]
        if rest in ("", "/", "/:memory:", ":memory:"):
            return DatabaseURL("sqlite", text, None)
        # sqlite:///relative/path and sqlite:////absolute/path, as SQLAlchemy spells them.
        path = Path(unquote(rest[1:] if rest.startswith("/") else rest)).expanduser()
        return DatabaseURL("sqlite", text, path)
    parts = urlsplit(text)
    # libpq's ``?host=/run/postgresql`` (a socket folder) wins over an empty netloc host.
    query_host = dict(parse_qsl(parts.query)).get("host")
    database = parts.path.lstrip("/") or None
    if not database:
        raise ConfigError(
            f"the database URL {text!r} names no database",
            hint=f"add the database name: {scheme}://user@host/dbname",
        )
    return DatabaseURL(
        backend,
        text,
        host=parts.hostname or query_host or "127.0.0.1",
        port=parts.port,
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        database=database,
    )
