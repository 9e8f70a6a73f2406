"""memoir's core: configuration, storage, models, and the features (rules, knowledge, memories).

Logging. memoir logs through structlog, whose configuration belongs to the application: memoir's
own entry points (the CLI, ``memoir serve``) send it to stderr. An application that embeds the
library and configures nothing would get structlog's default, which prints to **stdout**: the
JSON-RPC wire of an MCP server that embeds memoir. So, when structlog is not configured at
import, it is pointed at the standard library's ``logging``, where the ``memory_core`` logger has
a ``NullHandler``: nothing is printed unless the application configures logging (its handlers
then decide; ``logging.basicConfig`` writes to stderr). An application that configures structlog
itself, before or after this import, keeps its own configuration.
"""

from __future__ import annotations

import logging

import structlog

logging.getLogger("memory_core").addHandler(logging.NullHandler())
logging.getLogger("rules_parser").addHandler(logging.NullHandler())

if not structlog.is_configured():
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_log_level,
            structlog.processors.format_exc_info,
            structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
