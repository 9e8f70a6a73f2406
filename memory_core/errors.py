"""memoir's one exception tree.

Every error names what went wrong, the value involved, and what to do next (the ``hint``).
Adapters translate these at the edge: the CLI into an exit code and a JSON ``error`` object,
the MCP server into a tool error the model can read, the REST API into an HTTP status.

    MemoirError
    ├── ConfigError                 a setting has a bad value or a config file is malformed
    │   └── ScopeMismatchError      a store reopened with another scope model than it was made with
    ├── InvalidInputError           a caller passed something unusable (empty query, bad path…)
    │   ├── PathNotAllowedError     a path escapes the allowed roots (traversal, symlink)
    │   ├── QuerySyntaxError        RQL / FEL text that does not parse (carries line and column)
    │   └── LimitExceededError      input over a configured bound (names the limit and setting)
    ├── NotFoundError               an id, path or name that is not in the store
    │   └── CategoryMissingError    a chunk's leaf category was deleted (another process re-clustered)
    ├── EmptyKnowledgeGraphError    rules were queried before any were ingested
    ├── StorageError                the database could not do what was asked
    │   ├── DatabaseUnavailableError   cannot connect / open (names the URL, password hidden)
    │   ├── DatabaseLockedError        another process holds the write lock for too long
    │   ├── DatabaseCorruptError       the file fails integrity checks
    │   ├── SchemaError                the schema is newer than this code, or a migration failed
    │   └── ExtensionUnavailableError  sqlite-vec / FTS5 cannot be loaded
    ├── EmbeddingError              the embedder failed or cannot be loaded
    │   └── EmbedderMismatchError   the store was built with another embedder or dimension
    ├── ModelError                  an LLM call failed after its retries and fallbacks
    ├── PipelineRunError            a memory-layer pipeline step failed (names the step and run)
    ├── BudgetError                 a token budget that cannot be honoured (e.g. negative)
    └── RateLimitedError            too many calls; carries retry_after seconds
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BudgetError",
    "CategoryMissingError",
    "ConfigError",
    "DatabaseCorruptError",
    "DatabaseLockedError",
    "DatabaseUnavailableError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "EmptyKnowledgeGraphError",
    "ExtensionUnavailableError",
    "InvalidInputError",
    "LimitExceededError",
    "MemoirError",
    "ModelError",
    "NotFoundError",
    "PathNotAllowedError",
    "PipelineRunError",
    "QuerySyntaxError",
    "RateLimitedError",
    "SchemaError",
    "ScopeMismatchError",
    "StorageError",
]


class MemoirError(Exception):
    """Base of every error memoir raises on purpose.

    Attributes:
        message: what went wrong, naming the value involved.
        hint: the next step for the user (a command to run, a setting to change).
        details: optional machine-readable context (never document bodies or secrets).
    """

    code: str = "memoir_error"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or {}

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The Recall-spec ``error`` object: code, message, and details and hint when there are
        any (never ``"hint": null``)."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            out["details"] = self.details
        if self.hint:
            out["hint"] = self.hint
        return out


class ConfigError(MemoirError):
    code = "config_error"


class InvalidInputError(MemoirError):
    code = "invalid_input"


class PathNotAllowedError(InvalidInputError):
    code = "path_not_allowed"


class QuerySyntaxError(InvalidInputError):
    """A query or filter that does not parse; ``line`` and ``column`` are 1-based."""

    code = "query_syntax"

    def __init__(
        self,
        message: str,
        *,
        line: int,
        column: int,
        expected: str | None = None,
        hint: str | None = None,
    ) -> None:
        said = expected is not None and f"expected {expected}" in message
        super().__init__(
            f"{message} at line {line}, column {column}"
            + (f"; expected {expected}" if expected and not said else ""),
            hint=hint
            or (f"write {expected} there" if expected else "")
            or "check the statement against the grammar in docs/search.md",
            details={"line": line, "column": column, "expected": expected},
        )
        self.line = line
        self.column = column
        self.expected = expected


class LimitExceededError(InvalidInputError):
    """Input beyond a bound that protects the server (depth, size, count, length)."""

    code = "limit_exceeded"

    def __init__(
        self, what: str, *, value: int, limit: int, setting: str, hint: str | None = None
    ) -> None:
        env = "MEMOIR_" + setting.upper().replace(".", "__")
        super().__init__(
            f"{what}: {value} is over the limit of {limit} ({setting})",
            hint=hint or f"send smaller input, or raise {setting} ({env}) in memoir.toml",
            details={"value": value, "limit": limit, "setting": setting},
        )
        self.limit = limit
        self.setting = setting


class NotFoundError(MemoirError):
    code = "not_found"


class CategoryMissingError(NotFoundError):
    """The category chunks were to be filed under no longer exists: another process
    re-clustered or removed it between the filing and the write. Filing again resolves it."""


class EmptyKnowledgeGraphError(MemoirError):
    code = "empty_knowledge_graph"

    # The rules spec's wording (Requirement 11.1), naming the tool as it is registered: the
    # spec's dotted `memory.rules.upsert_markdown` is not a tool any client can call.
    SPEC_MESSAGE = "Knowledge graph is empty. Please ingest rule documents using upsert_markdown."

    def __init__(self, *, hint: str | None = None) -> None:
        super().__init__(
            self.SPEC_MESSAGE,
            hint=hint
            or "from a shell: `memoir rules upsert <folder>`; rules already loaded may be in "
            "another store (`memoir serve --print-config` shows the one a server opens)",
        )


class StorageError(MemoirError):
    code = "storage_error"


class DatabaseUnavailableError(StorageError):
    code = "database_unavailable"


class DatabaseLockedError(StorageError):
    code = "database_locked"


class DatabaseCorruptError(StorageError):
    code = "database_corrupt"


class SchemaError(StorageError):
    code = "schema_error"


class ExtensionUnavailableError(StorageError):
    code = "extension_unavailable"


class EmbeddingError(MemoirError):
    code = "embedding_error"


class EmbedderMismatchError(EmbeddingError):
    code = "embedder_mismatch"


class ModelError(MemoirError):
    code = "model_error"


class BudgetError(MemoirError):
    code = "budget_error"


class RateLimitedError(MemoirError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: float, hint: str | None = None) -> None:
        super().__init__(
            message,
            hint=hint or f"retry after {retry_after:.1f} s",
            details={"retry_after": retry_after},
        )
        self.retry_after = retry_after


class ScopeMismatchError(ConfigError):
    code = "scope_mismatch"


class PipelineRunError(MemoirError):
    code = "pipeline_failed"
