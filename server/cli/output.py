"""Output for the CLI: the Recall JSON envelope, human tables, and errors at the edge.

Every ``--json`` response has ``ok`` and ``schema_version``; failures carry
``error{code,message,details,hint}`` and exit non-zero. Human output goes to stdout, problems to
stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import IO, Any, NoReturn

import click

from memory_core.errors import (
    DatabaseCorruptError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    InvalidInputError,
    MemoirError,
    NotFoundError,
)
from memory_core.redaction import RedactingWriter

__all__ = [
    "SCHEMA_VERSION",
    "emit_json",
    "envelope",
    "exit_code_for",
    "fail",
    "print_table",
    "unredacted_stdout",
]

SCHEMA_VERSION = "1"

# Distinct codes let scripts tell "you asked wrongly" from "the store is broken".
_EXIT_CODES: tuple[tuple[type[MemoirError], int], ...] = (
    (InvalidInputError, 2),
    (NotFoundError, 3),
    (DatabaseLockedError, 5),
    (DatabaseCorruptError, 6),
    (DatabaseUnavailableError, 4),
)


def unredacted_stdout() -> IO[str]:
    """stdout past the CLI's redacting wrapper, for output redacted where it is made (backup
    records: their base64 vectors must not be touched)."""
    stream = sys.stdout
    return stream.target if isinstance(stream, RedactingWriter) else stream


def exit_code_for(error: MemoirError) -> int:
    for cls, code in _EXIT_CODES:
        if isinstance(error, cls):
            return code
    return 1


def envelope(ok: bool = True, **fields: Any) -> dict[str, Any]:
    """A Recall-spec response: ``ok``, ``schema_version``, then the given fields (None omitted)."""
    body: dict[str, Any] = {"ok": ok, "schema_version": SCHEMA_VERSION}
    body.update({k: v for k, v in fields.items() if v is not None})
    return body


def emit_json(payload: dict[str, Any]) -> None:
    click.echo(json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=False, default=str))


def fail(error: MemoirError, *, as_json: bool) -> NoReturn:
    """Report ``error`` (JSON envelope on stdout, or message + hint on stderr) and exit."""
    if as_json:
        emit_json(envelope(False, error=error.to_dict()))
    else:
        click.echo(f"error: {error.message}", err=True)
        if error.hint:
            click.echo(f"hint: {error.hint}", err=True)
    sys.exit(exit_code_for(error))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plain aligned text table (no dependency, fast to import)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for index, row in enumerate(cells):
        click.echo("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if index == 0:
            click.echo("  ".join("-" * w for w in widths))
