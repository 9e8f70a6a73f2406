"""The ``/memory`` web page: one self-contained HTML file (inline CSS, vanilla JS, SVG charts;
nothing from a CDN, so it works offline) that talks to ``/v1/memory`` from the same origin.

The page itself holds no data (it is public, like ``/healthz``); every call it makes goes to
the guarded REST routes with the bearer token the user types in (kept in ``sessionStorage``).
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["page_html"]


@functools.cache
def page_html() -> str:
    return (resources.files("server.mcp_app") / "memory.html").read_text(encoding="utf-8")
