"""The ``/v1/memory`` request models, their error messages, and the OpenAPI 3.1 document.

Every request (query string or JSON body) is one pydantic model with ``extra="forbid"``; a
value it refuses becomes an error naming the field, the limit and the fix
(:func:`validation_error`). The OpenAPI document is built from these models' and the response
models' JSON schemas (:func:`openapi_document`), so it cannot drift from what is validated.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any, Literal

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import models_json_schema

from memory_core.memories.responses import (
    EntryPage,
    ForgetResult,
    MemoryStats,
    MemorySummary,
    MemoryView,
    RecallResult,
    RememberResult,
    SettingsView,
)

__all__ = [
    "CreateEntry",
    "EntriesQuery",
    "ErrorOut",
    "HistoryOut",
    "SearchQuery",
    "SessionBody",
    "SettingsBody",
    "SpaceQuery",
    "StatsOut",
    "StatsQuery",
    "openapi_document",
    "validation_error",
]

_IN = ConfigDict(extra="forbid")


class SpaceQuery(BaseModel):
    model_config = _IN

    space: str | None = Field(
        None,
        max_length=1000,
        description="The space (a namespace such as 'TheoEngine' or 'project:/path'); "
        "omit it for the caller's project.",
    )
    user: str | None = Field(
        None, max_length=200, description="The owning user; omit it for memories.default_user."
    )


class EntriesQuery(SpaceQuery):
    pinned: bool | None = Field(None, description="Only pinned (true) or unpinned (false) entries.")
    manually_saved: bool | None = Field(
        None, description="Only entries the user saved by hand (true) or not (false)."
    )
    tag: str | None = Field(None, max_length=64, description="Only entries with this tag.")
    include_history: bool = Field(False, description="Also list superseded entries.")
    limit: int = Field(50, ge=1, le=500, description="Entries per page, 1 to 500.")
    offset: int = Field(0, ge=0, description="Entries to skip (paging), 0 or more.")


class CreateEntry(SpaceQuery):
    text: str = Field(
        min_length=1, description="The fact, preference, decision or commitment to keep."
    )
    tags: list[str] = Field(
        default_factory=list, max_length=32, description="Labels, e.g. ['tooling']."
    )
    source_ids: list[str] = Field(
        default_factory=list, max_length=64, description="Provenance, e.g. ['chat:42']."
    )
    manually_saved: bool = Field(False, description="The user asked to save it (+0.5 importance).")
    pin: bool = Field(False, description="Pin it (never trimmed).")
    role: Literal["user", "assistant", "system"] = Field("user", description="Who said it.")
    session: str | None = Field(
        None, max_length=200, description="The chat session (incognito sessions save nothing)."
    )
    on_conflict: Literal["supersede", "ask", "keep"] = Field(
        "supersede",
        description="When it updates an older memory: supersede it, ask (write nothing), keep both.",
    )
    created_at: str | None = Field(
        None, max_length=64, description="When it was said, ISO 8601 (default: now)."
    )


class SettingsBody(SpaceQuery):
    memory_enabled: bool | None = Field(None, description="Turn memory on (true) or off (false).")
    incognito_default: bool | None = Field(
        None, description="New sessions start incognito (true) or not (false)."
    )
    soft_cap: int | None = Field(
        None, ge=1, le=10_000_000, description="Entries kept before trimming, at least 1."
    )


class SessionBody(SpaceQuery):
    session: str | None = Field(
        None, max_length=200, description="The chat session (default: the space's default one)."
    )


class SearchQuery(SpaceQuery):
    query: str = Field(min_length=1, max_length=4000, description="What to recall, e.g. 'deploys'.")
    k: int | None = Field(None, ge=1, le=100, description="How many entries at most, 1 to 100.")
    budget_tokens: int | None = Field(
        None, ge=1, le=100_000, description="The context's token budget, 1 to 100000."
    )
    now: str | None = Field(
        None, max_length=64, description="The time recency is measured at, ISO 8601."
    )
    session: str | None = Field(
        None, max_length=200, description="The chat session (incognito recalls nothing)."
    )
    include_history: bool = Field(False, description="Also rank superseded entries.")
    explain: bool = Field(False, description="Add each arm's candidates and the parameters.")


class StatsQuery(SpaceQuery):
    now: str | None = Field(
        None, max_length=64, description="The time ages are measured at, ISO 8601."
    )


class HistoryOut(BaseModel):
    """The supersession chain a memory belongs to, oldest first."""

    id: str
    chain: list[MemoryView]


class StatsOut(MemoryStats):
    """The space's telemetry, with the alert thresholds it is judged against and the ranking
    weights recall uses (to read a score breakdown)."""

    thresholds: dict[str, float]
    ranking: dict[str, float]


class ErrorBody(BaseModel):
    code: str
    message: str
    hint: str | None = None
    field: str | None = None
    limit: str | None = None
    details: dict[str, Any] | None = None


class ErrorOut(BaseModel):
    error: ErrorBody


# -- errors ------------------------------------------------------------------------------------


def _limit_of(model: type[BaseModel], field: str) -> str | None:
    info = model.model_fields.get(field)
    if info is None:
        return None
    parts: list[str] = []
    for item in info.metadata:
        if isinstance(item, Ge):
            parts.append(f">= {item.ge}")
        elif isinstance(item, Gt):
            parts.append(f"> {item.gt}")
        elif isinstance(item, Le):
            parts.append(f"<= {item.le}")
        elif isinstance(item, Lt):
            parts.append(f"< {item.lt}")
        elif isinstance(item, MinLen):
            parts.append(f"length >= {item.min_length}")
        elif isinstance(item, MaxLen):
            parts.append(f"length <= {item.max_length}")
    return ", ".join(parts) or None


def validation_error(model: type[BaseModel], exc: ValidationError) -> dict[str, Any]:
    """The first problem of ``exc`` as an error body: the field, the limit, the fix; every
    problem in ``details.errors``."""
    errors = exc.errors(include_url=False)
    # An unknown field first: it is usually a misspelling of the one reported missing.
    errors.sort(key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = [str(p) for p in first["loc"]]
    field = loc[0] if loc else "body"
    where = ".".join(loc) or "body"
    accepted = ", ".join(model.model_fields)
    info = model.model_fields.get(field)
    described = info.description if info is not None and info.description else ""
    limit = _limit_of(model, field)
    kind = first["type"]
    if kind == "extra_forbidden":
        message = f"unknown field {where!r}"
        close = difflib.get_close_matches(field, list(model.model_fields), n=1)
        hint = (f"did you mean {close[0]!r}? " if close else "remove it; ") + (
            f"the accepted fields are: {accepted}"
        )
    elif kind == "missing":
        message = f"{where} is required"
        hint = f"add {field}: {described}" if described else f"add {field}"
    else:
        got = first.get("input")
        shown = repr(got) if not isinstance(got, str) or len(got) <= 60 else repr(got[:60] + "…")
        message = f"{where}: {first['msg']} (got {shown})"
        hint = f"{field}: {described}" if described else f"fix {field}"
        if limit:
            hint += f" (allowed: {limit})"
    body: dict[str, Any] = {
        "code": "invalid_input",
        "message": message,
        "hint": hint,
        "field": where,
        "details": {
            "errors": [
                {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in errors
            ]
        },
    }
    if limit:
        body["limit"] = limit
    return body


# -- OpenAPI ---------------------------------------------------------------------------------------

_REF = "#/components/schemas/{model}"


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=_REF)
    required = set(schema.get("required", ()))
    params = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        description = prop.pop("description", None)
        prop.pop("title", None)
        param: dict[str, Any] = {
            "name": name,
            "in": "query",
            "required": name in required,
            "schema": prop,
        }
        if description:
            param["description"] = description
        params.append(param)
    return params


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": _REF.format(model=model.__name__)}


def _json(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(model)}}


_ERRORS = {
    "400": "Bad input (names the field, the limit and the fix).",
    "401": "Credentials missing or invalid (when the server has tokens).",
    "403": "The space is not one this token may use, or the Origin is refused.",
    "404": "No such memory in this space.",
    "422": "The request does not match its schema (names the field, the limit and the fix).",
    "429": "Over the rate limit.",
    "503": "The store is unavailable.",
}


def _op(
    op_id: str,
    summary: str,
    out: type[BaseModel],
    *,
    query: type[BaseModel] | None = None,
    body: type[BaseModel] | None = None,
    path_id: bool = False,
    status: str = "200",
) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "summary": summary, "tags": ["memory"]}
    params: list[dict[str, Any]] = []
    if path_id:
        params.append(
            {
                "name": "memory_id",
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
                "description": "The memory's id (or a unique prefix of 6+ hex digits).",
            }
        )
    if query is not None:
        params += _query_parameters(query)
    elif body is not None:
        params += [p for p in _query_parameters(SpaceQuery)]
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": body is CreateEntry, "content": _json(body)}
    responses: dict[str, Any] = {status: {"description": "OK", "content": _json(out)}}
    for code, text in _ERRORS.items():
        responses[code] = {"description": text, "content": _json(ErrorOut)}
    op["responses"] = responses
    return op


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of ``/v1/memory``."""
    models: list[type[BaseModel]] = [
        CreateEntry, EntriesQuery, SearchQuery, SessionBody, SettingsBody, SpaceQuery, StatsQuery,
        EntryPage, ForgetResult, HistoryOut, MemorySummary, MemoryView, RecallResult,
        RememberResult, SettingsView, StatsOut, ErrorOut,
    ]  # fmt: skip
    _, defs = models_json_schema(
        [(m, "validation" if m.__name__.endswith(("Query", "Body", "Entry")) else "serialization")
         for m in models],
        ref_template=_REF,
    )  # fmt: skip
    p = "/v1/memory"
    paths: dict[str, Any] = {
        f"{p}/summary": {
            "get": _op("summary", "A human-readable summary of the space's memories.",
                       MemorySummary, query=SpaceQuery),
        },
        f"{p}/entries": {
            "get": _op("listEntries", "List entries, newest first (pinned / manually_saved / "
                       "tag filters).", EntryPage, query=EntriesQuery),
            "post": _op("createEntry", "Remember: create an entry (or merge a near-duplicate).",
                        RememberResult, body=CreateEntry, status="201"),
        },
        f"{p}/entries/{{memory_id}}": {
            "get": _op("showEntry", "One entry with every field.", MemoryView,
                       query=SpaceQuery, path_id=True),
            "delete": _op("forgetEntry", "Forget an entry; a 24-hour tombstone of its digest "
                          "blocks re-creating it.", ForgetResult, query=SpaceQuery, path_id=True),
        },
        f"{p}/entries/{{memory_id}}/history": {
            "get": _op("entryHistory", "The supersession chain the entry belongs to, oldest "
                       "first.", HistoryOut, query=SpaceQuery, path_id=True),
        },
        f"{p}/entries/{{memory_id}}/pin": {
            "post": _op("pinEntry", "Pin an entry (never trimmed).", MemoryView,
                        query=SpaceQuery, path_id=True),
            "delete": _op("unpinEntry", "Unpin an entry.", MemoryView,
                          query=SpaceQuery, path_id=True),
        },
        f"{p}/settings": {
            "get": _op("getSettings", "The space's settings and the session's incognito state.",
                       SettingsView, query=SessionBody),
            "post": _op("setSettings", "Set memory_enabled / incognito_default (and soft_cap).",
                        SettingsView, body=SettingsBody),
            "put": _op("putSettings", "Same as POST.", SettingsView, body=SettingsBody),
        },
        f"{p}/incognito/start": {
            "post": _op("incognitoStart", "Start incognito for a session: nothing is saved or "
                        "recalled.", SettingsView, body=SessionBody),
        },
        f"{p}/incognito/end": {
            "post": _op("incognitoEnd", "End incognito for a session.", SettingsView,
                        body=SessionBody),
        },
        f"{p}/search": {
            "get": _op("search", "Recall: hybrid search ranked by relevance, recency and "
                       "importance; explain=true adds the score breakdown.", RecallResult,
                       query=SearchQuery),
            "post": _op("searchPost", "Same as GET, with a JSON body.", RecallResult,
                        body=SearchQuery),
        },
        f"{p}/stats": {
            "get": _op("stats", "Telemetry: embedding backlog, trims, dedupe saves, hit rate, "
                       "user actions per day, alerts.", StatsOut, query=StatsQuery),
        },
    }  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memoir memory API",
            "version": "1",
            "description": "The agent's memories: view, search, pin, forget, settings and "
            "incognito. Every route needs the server's bearer token when it has any.",
        },
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
