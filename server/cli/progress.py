"""Ingest progress on stderr: a bar on a terminal, one JSON object per batch under ``--json``.

Progress goes to stderr so stdout keeps exactly one result (the JSON envelope with ``--json``).
A JSON line reads ``{"event": "progress", "bytes_done": …, "bytes_total": …, "batches_done": …,
"chunks_done": …, "new_chunks": …, "batches_skipped": …}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

__all__ = ["ProgressReporter", "progress_reporter"]

_WIDTH = 30


class ProgressReporter:
    """An async progress callback for ``ingest_text`` / ``ingest_file``."""

    def __init__(self, stream: TextIO, *, as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self._drawn = False

    async def __call__(self, progress: Any) -> None:
        data = progress.as_dict()
        if self.as_json:
            self.stream.write(json.dumps({"event": "progress", **data}) + "\n")
        else:
            total = max(1, data["bytes_total"])
            share = min(1.0, data["bytes_done"] / total)
            filled = int(share * _WIDTH)
            self.stream.write(
                f"\r[{'#' * filled}{'.' * (_WIDTH - filled)}] {share:4.0%} "
                f"{data['bytes_done'] / 1e6:.1f}/{total / 1e6:.1f} MB, "
                f"{data['chunks_done']:,} chunks ({data['new_chunks']:,} new)"
            )
            self._drawn = True
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def progress_reporter(*, as_json: bool, stream: TextIO | None = None) -> ProgressReporter | None:
    """JSON lines under ``--json``, a bar when stderr is a terminal, else nothing."""
    out = stream or sys.stderr
    if as_json or out.isatty():
        return ProgressReporter(out, as_json=as_json)
    return None
