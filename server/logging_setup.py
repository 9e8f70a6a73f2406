"""structlog configuration, done once at an entry point. Always stderr: stdout is the MCP wire."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import structlog

__all__ = ["configure_logging", "sanitize"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def sanitize(text: str, limit: int = 100) -> str:
    """User text as it may appear in a log: control characters and newlines escaped (no log
    injection), and cut to ``limit`` characters."""
    flat = text.replace("\r", "\\r").replace("\n", "\\n")
    flat = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", flat)
    return flat if len(flat) <= limit else flat[:limit] + "…"


def configure_logging(level: str = "warning", fmt: str = "console") -> None:
    """Route structlog (and stdlib logging) to stderr at ``level``, as console text or JSON."""
    numeric = getattr(logging, level.upper(), logging.WARNING)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(stream=sys.stderr, level=numeric, force=True)
