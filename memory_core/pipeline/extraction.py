"""The offline model's judgements for the memory layer (seed 004 §2, §8.1). Pure, deterministic.

Items are sentences worth remembering, each with a span back into the resource text;
confidence, stability and intention come from cue words. A configured LLM profile replaces
these with pydantic-ai agents (:mod:`memory_core.pipeline.llm_steps`); these functions keep
every step working with no key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.llm.keyphrases import word_stems

__all__ = [
    "build_text",
    "evidence_location",
    "intention_from",
    "item_id_for",
    "normalise",
    "offline_extract",
    "query_terms",
    "sentence_spans",
    "stability_of",
    "wants_intention",
    "wants_overview",
]

# A sentence runs to . ! ? or a line end; the dot of a title or common abbreviation ("Ms.
# Hawkings", "e.g.") and of a decimal ("3.5") does not end it.
_SENTENCE = re.compile(
    r"(?:(?i:\b(?:mr|mrs|ms|dr|prof|sr|jr|st|mt|vs|etc|no|e\.g|i\.e)\.)(?=\s+\w)"
    r"|(?<=\d)\.(?=\d)|[^.!?\n])+[.!?]*",
    re.UNICODE,
)
_WORD = re.compile(r"\w+")
_FILLER = re.compile(
    r"^(hi|hello|hey|thanks|thank you|ok|okay|sure|great|cool|yes|no|bye|good (morning|night))\b",
    re.IGNORECASE,
)
_GOAL = re.compile(
    r"\b(want to|wants to|goal|aim|plan to|planning to|trying to|need to|hope to|would like to"
    r"|intend|objective|looking to)\b",
    re.IGNORECASE,
)
_CONSTRAINT = re.compile(
    r"\b(must|must not|cannot|can't|can not|don't|do not|never|only|without|budget|deadline"
    r"|no more than|at most|at least|allergic|avoid|limit)\b",
    re.IGNORECASE,
)
_PROGRESS = re.compile(
    r"\b(done|finished|completed|started|working on|in progress|shipped|deployed|fixed"
    r"|migrated|already|so far|halfway)\b",
    re.IGNORECASE,
)
_STABLE = re.compile(
    r"\b(always|prefer|prefers|favorite|favourite|name is|i am|i'm a|we use|our stack|born"
    r"|live in|works at|allergic|never)\b",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(
    r"\b(today|tomorrow|tonight|this week|right now|currently|at the moment|yesterday)\b",
    re.IGNORECASE,
)
# A query *about* the user's goals, constraints or progress: a topic noun, or a question whose
# verb is the subject's aim ("what am I trying to do?"). A request that merely states a need
# ("I want to cancel my order", "order status") is not one: it wants items.
_INTENT_QUERY = re.compile(
    r"\b(goals?|objectives?|intentions?|aims|priorities|constraints)\b"
    r"|\bwhat(?:'s|\s+is|\s+are)\s+(?:my|our|his|her|their|the)\s+plans?\b"
    r"|\bwhat\s+(?:am|are|is|do|does|did|was|were)\s+(?:\w+\s+){1,2}?"
    r"(?:trying|working|aiming|hoping|planning|plan|plans|intend|intends|want|wants)\b"
    r"|\b(?:what|how\s+much)\s+progress\b|\bprogress\s+(?:so\s+far|made)\b"
    r"|\b(?:my|our|his|her|their)\s+progress\b|\bworking\s+towards?\b",
    re.IGNORECASE,
)
_OVERVIEW_QUERY = re.compile(r"\b(overview|summary|summarise|summarize|everything about)\b", re.I)


def normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def item_id_for(scope: Mapping[str, str], text: str) -> str:
    """A stable item id from the scope values and the normalised text (same fact, same id)."""
    key = "\x1f".join([*(f"{k}={scope[k]}" for k in sorted(scope)), normalise(text)])
    return "it_" + hashlib.sha256(key.encode()).hexdigest()[:20]


def build_text(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A conversation as ``role: content`` lines, with each turn's span in the text."""
    parts: list[str] = []
    segments: list[dict[str, Any]] = []
    offset = 0
    for turn, message in enumerate(messages):
        role = str(message.get("role", "user"))
        content = str(message.get("content", ""))
        line = f"{role}: {content}"
        start = offset + len(role) + 2
        segments.append({"turn": turn, "role": role, "start": start, "end": start + len(content)})
        parts.append(line)
        offset += len(line) + 1
    return "\n".join(parts), segments


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text[start:end]``, stripped."""
    stop = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    for match in _SENTENCE.finditer(text, start, stop):
        s, e = match.start(), match.end()
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


def stability_of(sentence: str) -> str:
    """``stable`` (identity, preferences), ``transient`` (dated) or ``evolving``."""
    if _TRANSIENT.search(sentence):
        return "transient"
    if _STABLE.search(sentence):
        return "stable"
    return "evolving"


def _worth_keeping(sentence: str, role: str | None) -> bool:
    """An assistant's questions and fragments are chatter; a user's are the request ("how can I
    cancel order 123?", "order 123 status"), kept when they carry two content words. Text
    without roles (files) keeps statements of four words or more."""
    words = _WORD.findall(sentence)
    if _FILLER.match(sentence.strip()) and len(words) < 7:
        return False
    if role == "user":
        return len(words) >= 4 or len(word_stems(sentence)) >= 2
    return len(words) >= 4 and not sentence.rstrip().endswith("?")


_NOT_USER = ("assistant", "system", "tool")
# where in the resource a segment sits, beyond its span: a chat turn, a PDF page, a time
_LOCATION_KEYS = ("turn", "page", "timestamp", "start_s", "end_s")


def evidence_location(segment: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence fields a segment contributes (turn, page, timestamp, start_s, end_s)."""
    return {key: segment[key] for key in _LOCATION_KEYS if segment.get(key) is not None}


def offline_extract(
    text: str,
    segments: Sequence[Mapping[str, Any]],
    resource_id: str,
    *,
    max_items: int,
) -> list[dict[str, Any]]:
    """Candidate items: sentences worth keeping, with evidence (span, turn) and confidence.

    A user's own statements weigh more than an assistant's; cue words (preferences, goals,
    constraints) raise confidence.
    """
    regions = list(segments) or [{"start": 0, "end": len(text), "role": None, "turn": None}]
    out: list[dict[str, Any]] = []
    for region in regions:
        for start, end in sentence_spans(text, int(region["start"]), int(region["end"])):
            sentence = text[start:end]
            if not _worth_keeping(sentence, region.get("role")):
                continue
            confidence = 0.6
            if region.get("role") in _NOT_USER:
                confidence -= 0.2
            elif sentence.rstrip().endswith("?"):
                confidence -= 0.1
            if _STABLE.search(sentence) or _GOAL.search(sentence) or _CONSTRAINT.search(sentence):
                confidence += 0.2
            evidence: dict[str, Any] = {"resource_id": resource_id, "span": [start, end]}
            evidence.update(evidence_location(region))
            out.append(
                {
                    "text": sentence,
                    "evidence": [evidence],
                    "confidence": round(min(confidence, 0.95), 2),
                    "stability": stability_of(sentence),
                }
            )
            if len(out) >= max_items:
                return out
    return out


def intention_from(
    texts: Sequence[tuple[str, str]], previous: Mapping[str, Any] | None, *, limit: int = 8
) -> dict[str, Any]:
    """Goals, constraints and progress from ``(item_id, text)`` pairs, merged with the last
    intention (newest first, deduplicated, at most ``limit`` each)."""
    goals: list[str] = []
    constraints: list[str] = []
    progress: list[str] = []
    sources: list[str] = []
    for item_id, text in texts:
        hit = False
        if _GOAL.search(text):
            goals.append(text)
            hit = True
        if _CONSTRAINT.search(text):
            constraints.append(text)
            hit = True
        if _PROGRESS.search(text):
            progress.append(text)
            hit = True
        if hit:
            sources.append(item_id)
    prev = previous or {}

    def merged(new: list[str], old: Sequence[str]) -> list[str]:
        seen: dict[str, str] = {}
        for entry in [*reversed(new), *old]:
            seen.setdefault(normalise(entry), entry)
        return list(seen.values())[:limit]

    return {
        "goals": merged(goals, prev.get("goals", [])),
        "constraints": merged(constraints, prev.get("constraints", [])),
        "progress": merged(progress, prev.get("progress", [])),
        "source_item_ids": list(dict.fromkeys([*sources, *prev.get("source_item_ids", [])]))[
            : 4 * limit
        ],
    }


def query_terms(query: str, limit: int = 12) -> list[str]:
    """Lexical terms of a query: lowercased words without stopwords (the stored text is not
    stemmed, so neither are the terms)."""
    stems = set(word_stems(query))
    words = [w for w in _WORD.findall(query.lower()) if len(w) > 2]
    kept = [w for w in words if any(w.startswith(s) for s in stems)] or words
    return list(dict.fromkeys(kept))[:limit]


def wants_intention(query: str) -> bool:
    """Whether ``query`` asks about the user's goals, constraints or progress (not whether it
    states a need of its own: "I want to cancel my order" asks for items)."""
    return bool(_INTENT_QUERY.search(query))


def wants_overview(query: str) -> bool:
    return bool(_OVERVIEW_QUERY.search(query))
