"""Prompts for the hierarchy steps, each with a machine-readable context block.

Every user prompt is an instruction for a person-like model followed by the same facts as JSON
inside ``<memoir-context>`` tags. A real model reads either; the offline model reads only the
JSON (:func:`extract_context`), so its behaviour never depends on prompt wording.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CONTEXT_CLOSE",
    "CONTEXT_OPEN",
    "answer_prompt",
    "classify_prompt",
    "extract_context",
    "select_prompt",
    "summarise_prompt",
]

CONTEXT_OPEN = "<memoir-context>"
CONTEXT_CLOSE = "</memoir-context>"

CLASSIFY_INSTRUCTIONS = (
    "You file text chunks into a category hierarchy. At each level you either reuse one of the "
    "existing categories (copy its name exactly) or, when allowed and nothing fits, name a new "
    "category of one to four words that is broad enough to hold similar text later. Prefer "
    "reuse: near-duplicate names are a defect."
)
SELECT_INSTRUCTIONS = (
    "You route a question through a category hierarchy. Choose the categories most likely to "
    "hold the answer, exactly as many as asked, best first, copying each name exactly, and rate "
    "each with ranked_relevance (1 = barely related, 10 = certainly holds the answer) and a "
    "confidence between 0 and 1."
)
SUMMARISE_INSTRUCTIONS = (
    "You condense retrieved passages for a question. Keep every fact that could help answer "
    "it, drop the rest, and stay within the requested length. Never invent facts."
)
ANSWER_INSTRUCTIONS = (
    "You answer a question from retrieved passages only. Cite the chunk ids of the passages "
    "you used. If the passages do not contain the answer, say so plainly."
)


def _with_context(text: str, context: dict[str, Any]) -> str:
    payload = json.dumps(context, ensure_ascii=False, sort_keys=True)
    return f"{text}\n\n{CONTEXT_OPEN}\n{payload}\n{CONTEXT_CLOSE}"


def classify_prompt(
    *,
    text: str,
    level: int,
    depth: int,
    path: Sequence[str],
    options: Sequence[str],
    allow_new: bool,
) -> str:
    where = " / ".join(path) if path else "the top of the hierarchy"
    listed = "\n".join(f"- {name}" for name in options) or "(none yet)"
    rule = (
        "Reuse one of them if it fits; otherwise name a new category."
        if allow_new
        else "The category limit is reached: you MUST choose one of them."
    )
    body = (
        f"Level {level} of {depth}, under {where}.\nExisting categories at this level:\n"
        f"{listed}\n{rule}\n\nText:\n{text}"
    )
    return _with_context(
        body,
        {
            "task": "classify",
            "level": level,
            "depth": depth,
            "path": list(path),
            "options": list(options),
            "allow_new": allow_new,
            "text": text,
        },
    )


def select_prompt(*, question: str, level: int, options: Sequence[str], count: int) -> str:
    listed = "\n".join(f"- {name}" for name in options)
    body = (
        f"Question: {question}\n\nLevel {level} categories:\n{listed}\n\n"
        f"Select exactly {count} of them, best first."
    )
    return _with_context(
        body,
        {
            "task": "select",
            "question": question,
            "level": level,
            "options": list(options),
            "count": count,
        },
    )


def summarise_prompt(*, question: str, text: str, target_tokens: int, part: int, parts: int) -> str:
    body = (
        f"Question: {question}\n\nPart {part} of {parts} of the retrieved passages. Summarise it "
        f"in at most {target_tokens} tokens.\n\n{text}"
    )
    return _with_context(
        body,
        {
            "task": "summarise",
            "question": question,
            "text": text,
            "target_tokens": target_tokens,
            "part": part,
            "parts": parts,
        },
    )


def answer_prompt(*, question: str, passages: Sequence[dict[str, str]]) -> str:
    shown = "\n\n".join(f"[{p['chunk_id']}] ({p['category_path']})\n{p['text']}" for p in passages)
    body = f"Question: {question}\n\nPassages:\n{shown}"
    return _with_context(body, {"task": "answer", "question": question, "passages": list(passages)})


def extract_context(prompt: str) -> dict[str, Any] | None:
    """The JSON context block of a prompt, or None when it has none."""
    start = prompt.rfind(CONTEXT_OPEN)
    end = prompt.rfind(CONTEXT_CLOSE)
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(prompt[start + len(CONTEXT_OPEN) : end])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
