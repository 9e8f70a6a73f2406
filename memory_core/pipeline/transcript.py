"""Timestamps in a transcript (seed 004 §2.2: evidence points back to a timestamp). Pure.

A transcription model is asked for one line per utterance, each starting with its time; the
forms read here are the ones models and subtitle files write:

    [00:01:05] We ship on Tuesday.          [1:05] ...          (01:05) ...
    [00:01:05 - 00:01:09] ...               00:01:05 --> 00:01:09   (SRT / WebVTT cue line,
                                                                     text on the next lines)
    00:01:05 We ship on Tuesday.            (an unbracketed stamp needs hours: "10:30 we met"
                                             is speech, not a time)

Each cue is the text after its stamp up to the next stamp, with its offsets into the
transcript, so an item's span and its time come from the same place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Cue", "format_seconds", "transcript_cues"]

_TIME = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?"
_HOURS = r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,3})?"
_CUE = re.compile(
    rf"^[ \t]*(?:"
    rf"[\[(](?P<b_start>{_TIME})(?:[ \t]*(?:-->|-|–)[ \t]*(?P<b_end>{_TIME}))?[\])]"
    rf"|(?P<a_start>{_HOURS})[ \t]*-->[ \t]*(?P<a_end>{_HOURS})"
    rf"|(?P<h_start>{_HOURS})(?=[ \t])"
    rf")[ \t]*:?[ \t]*",
    re.MULTILINE,
)
# an SRT cue number on its own line, just before the next cue's time line
_CUE_NUMBER = re.compile(r"\n[ \t]*\d+[ \t]*\n?\s*$")


@dataclass(frozen=True)
class Cue:
    """One timed stretch of a transcript: ``text[start:end]`` was said from ``start_s``
    (to ``end_s`` when the stamp or the next cue says so); ``stamp`` is that time as
    ``hh:mm:ss``, written in the transcript from offset ``stamp_at``."""

    stamp_at: int
    start: int
    end: int
    start_s: float
    end_s: float | None
    stamp: str


def _seconds(stamp: str) -> float:
    whole, _, fraction = stamp.replace(",", ".").partition(".")
    seconds = 0
    for part in whole.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds + (float(f"0.{fraction}") if fraction else 0.0)


def format_seconds(seconds: float) -> str:
    """``65.0`` as ``00:01:05`` (hours always shown, fractions dropped)."""
    whole = int(seconds)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def transcript_cues(text: str) -> list[Cue]:
    """The timed cues of ``text``, in order (empty when no line starts with a time)."""
    found = list(_CUE.finditer(text))
    cues: list[Cue] = []
    for n, match in enumerate(found):
        start_stamp = match["b_start"] or match["a_start"] or match["h_start"]
        end_stamp = match["b_end"] or match["a_end"]
        stop = found[n + 1].start() if n + 1 < len(found) else len(text)
        body = text[match.end() : stop]
        number = _CUE_NUMBER.search(body)
        if number is not None:
            body = body[: number.start()]
        begin = match.end() + (len(body) - len(body.lstrip()))
        finish = match.end() + len(body.rstrip())
        if finish <= begin:
            continue
        start_s = _seconds(start_stamp)
        if end_stamp is not None:
            end_s: float | None = _seconds(end_stamp)
        elif n + 1 < len(found):
            nxt = found[n + 1]
            end_s = _seconds(nxt["b_start"] or nxt["a_start"] or nxt["h_start"])
        else:
            end_s = None
        cues.append(Cue(match.start(), begin, finish, start_s, end_s, format_seconds(start_s)))
    return cues
