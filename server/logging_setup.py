"""structlog configuration, done once at an entry point. Always stderr: stdout is the MCP wire.

Every line goes through memoir's processors, its own and those of the libraries underneath
(aiosqlite, sse_starlette, httpx, uvicorn, the MCP SDK): one stdlib handler on the root logger
renders foreign records with the same chain, so each value is redacted
(:func:`memory_core.redaction.redact_text`) and cut to a bounded length before it is written.
uvicorn is told not to install its own handlers (``log_config=None``). The libraries that log
whole payloads at debug level (SQL parameters, SSE chunks, HTTP bodies) are held at ``info``
unless ``logging.library_debug`` is set, and even then their lines are redacted and cut. The
loggers that write user content itself at debug level (:data:`CONTENT_LOGGERS`: Burr logs every
state it saves, a whole chat) are held at ``info`` whatever the settings.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from memory_core.redaction import redact_text

__all__ = ["CONTENT_LOGGERS", "PAYLOAD_LOGGERS", "configure_logging", "redact_event", "sanitize"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

# Libraries whose debug lines are payload dumps (statements with their parameters, stream
# chunks, request bodies).
PAYLOAD_LOGGERS = (
    "aiosqlite",
    "sse_starlette",
    "httpx",
    "httpcore",
    "uvicorn",
    "mcp",
    "asyncio",
    "onnxruntime",
    "pydantic_ai",
    "openai",
    "anthropic",
)

# Loggers whose debug lines are user content: ``burr.core.state`` logs each state Burr's
# persister saves or loads (the memorize's chat, the extracted items). Never below info, even
# with library_debug: redaction hides secrets, not a user's conversation.
CONTENT_LOGGERS = ("burr.core.state",)

# A foreign log value longer than this is cut: a library's line never carries a whole document.
_MAX_VALUE_CHARS = 500


def sanitize(text: str, limit: int = 100) -> str:
    """User text as it may appear in a log: secrets redacted, control characters and newlines
    escaped (no log injection), and cut to ``limit`` characters."""
    flat = redact_text(text[: limit * 4]).replace("\r", "\\r").replace("\n", "\\n")
    flat = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", flat)
    return flat if len(flat) <= limit else flat[:limit] + "…"


def _clip(value: str) -> str:
    return value if len(value) <= _MAX_VALUE_CHARS else value[:_MAX_VALUE_CHARS] + "…"


def redact_event(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> Any:
    """structlog processor: every string value redacted and cut; other values rendered as
    strings first when they are containers (a dict of parameters may hold a key)."""
    for key, value in list(event.items()):
        if isinstance(value, str):
            event[key] = _clip(redact_text(value))
        elif isinstance(value, dict | list | tuple | set | bytes):
            event[key] = _clip(redact_text(repr(value)))
    return event


def _exception_text(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> Any:
    # Tracebacks are rendered to text before redaction so their frames' values are covered.
    return structlog.processors.format_exc_info(_logger, _name, event)


def configure_logging(
    level: str = "warning", fmt: str = "console", *, library_debug: bool = False
) -> None:
    """Route structlog and stdlib logging to stderr at ``level``, as console text or JSON,
    every line redacted."""
    numeric = getattr(logging, level.upper(), logging.WARNING)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _exception_text,
        redact_event,
    ]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    floor = numeric if library_debug else max(numeric, logging.INFO)
    for name in PAYLOAD_LOGGERS:
        library = logging.getLogger(name)
        library.setLevel(floor)
        for old in list(library.handlers):  # e.g. a handler a library installed for itself
            library.removeHandler(old)
        library.propagate = True
    for name in CONTENT_LOGGERS:
        logging.getLogger(name).setLevel(max(numeric, logging.INFO))
    logging.captureWarnings(True)
