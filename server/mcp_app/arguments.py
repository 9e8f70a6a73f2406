"""Arguments that do not match a tool's input schema, told the way a model can fix them.

The SDK reports such a call as ``isError`` with pydantic's raw text ("1 validation error for
queryArguments … For further information visit https://errors.pydantic.dev/…"). This turns it
into one line per problem, in the tool's own words (``missing argument 'question'``,
``'token_budget' must be an integer, got 'lots'``, ``unknown argument 'txt' (did you mean
'text'?)``), a hint listing the arguments the tool takes, and an ``invalid_arguments`` error in
``structuredContent``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError
from rapidfuzz import process

__all__ = [
    "argument_error_result",
    "describe_arguments",
    "describe_problems",
    "unknown_arguments",
]

_MAX_VALUE_CHARS = 40


def _type_of(schema: Mapping[str, Any]) -> str:
    """The schema in words: "a non-empty string", "an integer 50-8000", "one of a | b"."""
    if "enum" in schema:
        return "one of " + " | ".join(str(v) for v in schema["enum"] if v is not None)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else " or ".join(kinds)
    options = schema.get("anyOf")
    if kind is None and isinstance(options, list):
        return " or ".join(_type_of(o) for o in options if o.get("type") != "null")
    if kind == "array":
        return f"a list of {_type_of(schema.get('items', {})).removeprefix('a ')}"
    if kind == "string" and schema.get("minLength", 0) >= 1:
        return "a non-empty string"
    low, high = schema.get("minimum"), schema.get("maximum")
    article = "an" if str(kind)[:1] in "aeiou" else "a"
    described = f"{article} {kind or 'value'}"
    if low is not None and high is not None:
        return f"{described} {low}-{high}"
    if low is not None:
        return f"{described} >= {low}"
    return f"{described} <= {high}" if high is not None else described


def describe_arguments(schema: Mapping[str, Any]) -> str:
    """``question (a non-empty string, required), strategy (one of …)``: what the tool takes."""
    required = set(schema.get("required", []))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        suffix = ", required" if name in required else ""
        parts.append(f"{name} ({_type_of(prop)}{suffix})")
    return ", ".join(parts)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def describe_problems(
    error: ValidationError, schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> list[str]:
    """One plain sentence per problem with the arguments."""
    known = list(schema.get("properties", {}))
    problems: list[str] = []
    for issue in error.errors():
        where = ".".join(str(part) for part in issue["loc"]) or "arguments"
        name = str(issue["loc"][0]) if issue["loc"] else ""
        kind = issue["type"]
        if kind == "missing":
            problems.append(f"missing argument {where!r}")
        elif kind == "extra_forbidden":
            problems.append(_unknown(name, known))
        else:
            expected = _type_of(schema.get("properties", {}).get(name, {}))
            problems.append(f"{where!r} must be {expected}, got {_shown(issue.get('input'))}")
    for name in arguments:
        if name not in known and not any(name in p for p in problems):
            problems.append(_unknown(name, known))
    return problems


def _unknown(name: str, known: list[str]) -> str:
    match = process.extractOne(name, known, score_cutoff=60) if known else None
    guess = f" (did you mean {match[0]!r}?)" if match else ""
    return f"unknown argument {name!r}{guess}"


def unknown_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """A sentence per argument the tool does not take (a misspelt optional argument would
    otherwise be dropped silently and the call run with its default)."""
    known = list(schema.get("properties", {}))
    return [_unknown(name, known) for name in arguments if name not in known]


def _missing(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    return [f"missing argument {n!r}" for n in schema.get("required", []) if n not in arguments]


def argument_error_result(
    tool: str,
    schema: Mapping[str, Any],
    arguments: Mapping[str, Any],
    error: ValidationError | None = None,
) -> CallToolResult:
    """The ``isError`` result for a call whose arguments do not fit ``schema``."""
    if error is not None:
        problems = describe_problems(error, schema, arguments)
    else:
        problems = _missing(schema, arguments) + unknown_arguments(schema, arguments)
    message = f"{tool}: {'; '.join(problems)}"
    hint = f"{tool} takes {describe_arguments(schema)}"
    return CallToolResult(
        content=[TextContent(type="text", text=f"{message}\nHint: {hint}")],
        structured_content={
            "error": {
                "code": "invalid_arguments",
                "message": message,
                "details": {"problems": problems},
                "hint": hint,
            }
        },
        is_error=True,
    )
