"""``/v1/memory``: the agent-memory REST API (seed 001 "REST endpoints"), and its OpenAPI document.

Thin over ``memoir.memories`` (:class:`memory_core.memories.service.MemoryService`): each
handler validates its input against one pydantic model (:mod:`server.mcp_app.memory_api`),
makes one facade call and returns the response model as JSON, redacted. Routes sit behind the
same guards as MCP (:mod:`server.mcp_app.http_guard`: Host / Origin, body size, bearer token)
and share its rate limit and store-health checks.

The space: the ``space`` query parameter (or body field), else the caller's project scope as the
server decides it for MCP calls. A token limited to some workspaces may only use the project
spaces of those workspaces; other callers may name any space (as the CLI does).

Errors are ``{"error": {"code", "message", "hint", "field"?, "limit"?}}`` with 400 / 422 (bad
input), 403 (space not allowed), 404 (no such memory), 429 (rate), 503 (store unavailable).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memory_core.errors import (
    DatabaseCorruptError,
    InvalidInputError,
    MemoirError,
    NotFoundError,
    RateLimitedError,
    StorageError,
)
from memory_core.redaction import redact_value
from memory_core.scope import project_scope
from server.mcp_app.app import MemoirMCPServer
from server.mcp_app.auth import grant_of_request, principal_of_request
from server.mcp_app.calls import scope_for
from server.mcp_app.memory_api import (
    CreateEntry,
    EntriesQuery,
    HistoryOut,
    SearchQuery,
    SessionBody,
    SettingsBody,
    SpaceQuery,
    StatsOut,
    StatsQuery,
    validation_error,
)
from server.mcp_app.runtime import MemoirRuntime, refuse_unwritable

__all__ = ["PREFIX", "add_memory_routes"]

log = structlog.get_logger(__name__)

PREFIX = "/v1/memory"

Handler = Callable[[Any, Any, str], Awaitable[Any]]


class ApiError(Exception):
    """An error answered as JSON with ``status``."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message", ""))
        self.status = status
        self.body = body


def _status_of(error: MemoirError) -> int:
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, RateLimitedError):
        return 429
    if isinstance(error, InvalidInputError):
        return 400
    if isinstance(error, DatabaseCorruptError | StorageError):
        return 503
    return 500


def error_response(status: int, body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(redact_value({"error": body}), status_code=status)


async def _read_json(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(
            400,
            {
                "code": "invalid_json",
                "message": f"the request body is not JSON ({exc})",
                "hint": 'send a JSON object, e.g. {"text": "User prefers pnpm"}, with '
                "Content-Type: application/json",
            },
        ) from None
    if not isinstance(data, dict):
        raise ApiError(
            400,
            {
                "code": "invalid_json",
                "message": f"the request body is a JSON {type(data).__name__}, not an object",
                "hint": 'send a JSON object, e.g. {"text": "User prefers pnpm"}',
            },
        )
    return data


def _parse(model: type[BaseModel], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(422, validation_error(model, exc)) from None


_MAX_ID = 64


def _memory_id(request: Request) -> str:
    """The ``{memory_id}`` of the path, checked the same way whatever the backend."""
    value = str(request.path_params["memory_id"])
    if not value.strip() or len(value) > _MAX_ID or any(ord(c) < 32 for c in value):
        raise ApiError(
            400,
            {
                "code": "invalid_input",
                "field": "memory_id",
                "limit": f"1 to {_MAX_ID} printable characters",
                "message": f"invalid memory id {value[:40]!r}",
                "hint": "use an id from GET /v1/memory/entries (24 hex digits, or a unique "
                "prefix of 6 or more)",
            },
        )
    return value


class MemoryRoutes:
    """The route handlers over one runtime (one per server)."""

    def __init__(self, runtime: MemoirRuntime) -> None:
        self.runtime = runtime

    # -- the space a call lands in -----------------------------------------------------------

    def space_of(self, request: Request, explicit: str | None, *, writes: bool) -> str:
        grant = grant_of_request(request)
        decision = scope_for([], self.runtime.scope_defaults, grant=grant)
        if explicit is None or not explicit.strip():
            if decision.scope is None and writes:
                raise ApiError(
                    400,
                    {
                        "code": "invalid_input",
                        "field": "space",
                        "message": "no space given and the server has no project scope for "
                        "this caller",
                        "hint": 'pass ?space=NAME (or a "space" field in the body), or start '
                        "the server with --workspace",
                    },
                )
            return decision.read_scope
        space = explicit.strip()
        if grant is not None:
            allowed = [project_scope(Path(p)) for p in decision.readable]
            if space not in allowed:
                raise ApiError(
                    403,
                    {
                        "code": "space_not_allowed",
                        "field": "space",
                        "message": f"space {space!r} is not one this token may use",
                        "hint": "use one of: " + ", ".join(allowed) + " (or omit space)",
                        "allowed": allowed,
                    },
                )
        return space

    # -- the call edge -------------------------------------------------------------------------

    async def run(
        self,
        request: Request,
        name: str,
        body: Callable[[Any], Awaitable[Any]],
        *,
        writes: bool,
        status: int = 200,
    ) -> Response:
        started = time.perf_counter()
        client = principal_of_request(request) or (
            f"rest:{request.client.host}" if request.client else "rest"
        )
        try:
            async with self.runtime.call(f"rest.{name}", client):
                memoir = await self.runtime.memoir()
                if writes:
                    refuse_unwritable(await self.runtime.store_health(memoir))
                result = await body(memoir)
        except ApiError as error:
            return error_response(error.status, error.body)
        except MemoirError as error:
            log.info("rest error", route=name, code=error.code)
            return error_response(_status_of(error), error.to_dict())
        log.info("rest call", route=name, took_ms=round((time.perf_counter() - started) * 1000, 1))
        payload = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
        return JSONResponse(redact_value(payload), status_code=status)

    async def guarded(
        self, request: Request, name: str, make: Callable[[], Awaitable[Response]]
    ) -> Response:
        try:
            return await make()
        except ApiError as error:
            return error_response(error.status, error.body)

    # -- handlers --------------------------------------------------------------------------------

    async def summary(self, request: Request) -> Response:
        async def go() -> Response:
            q = _parse(SpaceQuery, dict(request.query_params))
            space = self.space_of(request, q.space, writes=False)
            return await self.run(
                request,
                "summary",
                lambda m: m.memories.summary(space=space, user=q.user),
                writes=False,
            )

        return await self.guarded(request, "summary", go)

    async def list_entries(self, request: Request) -> Response:
        async def go() -> Response:
            q = _parse(EntriesQuery, dict(request.query_params))
            space = self.space_of(request, q.space, writes=False)
            return await self.run(
                request,
                "entries",
                lambda m: m.memories.entries(
                    space=space,
                    user=q.user,
                    pinned=q.pinned,
                    manually_saved=q.manually_saved,
                    tag=q.tag,
                    include_history=q.include_history,
                    limit=q.limit,
                    offset=q.offset,
                ),
                writes=False,
            )

        return await self.guarded(request, "entries", go)

    async def create_entry(self, request: Request) -> Response:
        async def go() -> Response:
            data = await _read_json(request)
            data.setdefault("space", request.query_params.get("space"))
            data.setdefault("user", request.query_params.get("user"))
            body = _parse(CreateEntry, data)
            space = self.space_of(request, body.space, writes=True)

            async def call(m: Any) -> Any:
                return await m.memories.remember(
                    body.text, space=space, user=body.user, role=body.role, tags=body.tags,
                    source_ids=body.source_ids, manually_saved=body.manually_saved,
                    pin=body.pin, session=body.session, on_conflict=body.on_conflict,
                    created_at=body.created_at,
                )  # fmt: skip

            return await self.run(request, "create", call, writes=True, status=201)

        return await self.guarded(request, "create", go)

    async def show_entry(self, request: Request) -> Response:
        async def go() -> Response:
            q = _parse(SpaceQuery, dict(request.query_params))
            space = self.space_of(request, q.space, writes=False)
            memory_id = _memory_id(request)
            return await self.run(
                request,
                "show",
                lambda m: m.memories.show(memory_id, space=space, user=q.user),
                writes=False,
            )

        return await self.guarded(request, "show", go)

    async def history(self, request: Request) -> Response:
        async def go() -> Response:
            q = _parse(SpaceQuery, dict(request.query_params))
            space = self.space_of(request, q.space, writes=False)
            memory_id = _memory_id(request)

            async def call(m: Any) -> Any:
                chain = await m.memories.history(memory_id, space=space, user=q.user)
                return HistoryOut(id=memory_id, chain=chain)

            return await self.run(request, "history", call, writes=False)

        return await self.guarded(request, "history", go)

    async def pin(self, request: Request) -> Response:
        pinned = request.method == "POST"

        async def go() -> Response:
            q = _parse(SpaceQuery, dict(request.query_params))
            space = self.space_of(request, q.space, writes=True)
            memory_id = _memory_id(request)

            async def call(m: Any) -> Any:
                method = m.memories.pin if pinned else m.memories.unpin
                return await method(memory_id, space=space, user=q.user)

            return await self.run(request, "pin" if pinned else "unpin", call, writes=True)

        return await self.guarded(request, "pin", go)

    async def forget(self, request: Request) -> Response:
        async def go() -> Response:
            q = _parse(SpaceQuery, dict(request.query_params))
            space = self.space_of(request, q.space, writes=True)
            memory_id = _memory_id(request)
            return await self.run(
                request,
                "forget",
                lambda m: m.memories.forget(memory_id, space=space, user=q.user),
                writes=True,
            )

        return await self.guarded(request, "forget", go)

    async def get_settings(self, request: Request) -> Response:
        async def go() -> Response:
            q = _parse(SessionBody, dict(request.query_params))
            space = self.space_of(request, q.space, writes=False)
            return await self.run(
                request,
                "settings",
                lambda m: m.memories.settings(space=space, user=q.user, session=q.session),
                writes=False,
            )

        return await self.guarded(request, "settings", go)

    async def set_settings(self, request: Request) -> Response:
        async def go() -> Response:
            data = await _read_json(request)
            data.setdefault("space", request.query_params.get("space"))
            data.setdefault("user", request.query_params.get("user"))
            body = _parse(SettingsBody, data)
            space = self.space_of(request, body.space, writes=True)
            return await self.run(
                request,
                "settings.update",
                lambda m: m.memories.update_settings(
                    space=space,
                    user=body.user,
                    memory_enabled=body.memory_enabled,
                    incognito_default=body.incognito_default,
                    soft_cap=body.soft_cap,
                ),
                writes=True,
            )

        return await self.guarded(request, "settings", go)

    async def incognito(self, request: Request) -> Response:
        on = request.path_params["action"] == "start"

        async def go() -> Response:
            data = await _read_json(request)
            data.setdefault("space", request.query_params.get("space"))
            data.setdefault("user", request.query_params.get("user"))
            data.setdefault("session", request.query_params.get("session"))
            body = _parse(SessionBody, data)
            space = self.space_of(request, body.space, writes=True)

            async def call(m: Any) -> Any:
                method = m.memories.incognito_start if on else m.memories.incognito_end
                return await method(space=space, user=body.user, session=body.session)

            return await self.run(request, "incognito", call, writes=True)

        return await self.guarded(request, "incognito", go)

    async def search(self, request: Request) -> Response:
        async def go() -> Response:
            if request.method == "POST":
                data = await _read_json(request)
                data.setdefault("space", request.query_params.get("space"))
            else:
                data = dict(request.query_params)
            q = _parse(SearchQuery, data)
            space = self.space_of(request, q.space, writes=False)
            return await self.run(
                request,
                "search",
                lambda m: m.memories.recall(
                    q.query,
                    space=space,
                    user=q.user,
                    k=q.k,
                    budget_tokens=q.budget_tokens,
                    now=q.now,
                    session=q.session,
                    include_history=q.include_history,
                    explain=q.explain,
                ),
                writes=False,
            )

        return await self.guarded(request, "search", go)

    async def stats(self, request: Request) -> Response:
        async def go() -> Response:
            q = _parse(StatsQuery, dict(request.query_params))
            space = self.space_of(request, q.space, writes=False)

            async def call(m: Any) -> Any:
                stats = await m.memories.stats(space=space, user=q.user, now=q.now)
                settings = m.memories.settings_
                thresholds = {
                    "backlog_alert": float(settings.backlog_alert),
                    "backlog_alert_age_s": float(settings.backlog_alert_age_s),
                }
                ranking = {
                    "alpha": settings.alpha,
                    "beta": settings.beta,
                    "gamma": settings.gamma,
                    "tau_days": settings.tau_days,
                    "rrf_k": float(settings.rrf_k),
                }
                return StatsOut(**stats.model_dump(), thresholds=thresholds, ranking=ranking)

            return await self.run(request, "stats", call, writes=False)

        return await self.guarded(request, "stats", go)


def add_memory_routes(app: MemoirMCPServer, runtime: MemoirRuntime) -> None:
    """Register ``/v1/memory/…``, ``/v1/openapi.json`` and the ``/memory`` page on ``app``."""
    from server.mcp_app.memory_api import openapi_document
    from server.mcp_app.memory_web import page_html

    routes = MemoryRoutes(runtime)
    table: list[tuple[str, list[str], Callable[[Request], Awaitable[Response]]]] = [
        ("/summary", ["GET"], routes.summary),
        ("/entries", ["GET"], routes.list_entries),
        ("/entries", ["POST"], routes.create_entry),
        ("/entries/{memory_id}", ["GET"], routes.show_entry),
        ("/entries/{memory_id}", ["DELETE"], routes.forget),
        ("/entries/{memory_id}/history", ["GET"], routes.history),
        ("/entries/{memory_id}/pin", ["POST", "DELETE"], routes.pin),
        ("/settings", ["GET"], routes.get_settings),
        ("/settings", ["POST", "PUT"], routes.set_settings),
        ("/incognito/{action:str}", ["POST"], routes.incognito),
        ("/search", ["GET", "POST"], routes.search),
        ("/stats", ["GET"], routes.stats),
    ]
    by_path: dict[str, dict[str, Callable[[Request], Awaitable[Response]]]] = {}
    for path, methods, handler in table:
        for method in methods:
            by_path.setdefault(path, {})[method] = handler

    for path, handlers in by_path.items():
        app.custom_route(PREFIX + path, methods=list(_METHODS))(_dispatch(handlers))
    # Anything else under the prefix: a JSON 404 pointing at the document, not a bare "Not Found".
    app.custom_route(PREFIX + "/{rest:path}", methods=list(_METHODS))(_dispatch({}))

    @app.custom_route("/v1/openapi.json", methods=["GET"])
    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document())

    @app.custom_route("/memory", methods=["GET"])
    async def page(request: Request) -> Response:
        return Response(
            page_html(),
            media_type="text/html; charset=utf-8",
            headers={
                "Cache-Control": "no-store",
                "Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
                "style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'",
                "X-Content-Type-Options": "nosniff",
                "X-Frame-Options": "DENY",
            },
        )


_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def _dispatch(
    handlers: dict[str, Callable[[Request], Awaitable[Response]]],
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        if not handlers:
            return error_response(
                404,
                {
                    "code": "not_found",
                    "message": f"no route {request.method} {request.url.path}",
                    "hint": f"the memory routes are under {PREFIX}; GET /v1/openapi.json lists "
                    "them (a memory id holds only hex digits)",
                },
            )
        if request.method not in handlers:
            allowed = ", ".join(handlers)
            return error_response(
                405,
                {
                    "code": "method_not_allowed",
                    "message": f"{request.method} is not accepted on {request.url.path}",
                    "hint": f"use {allowed}",
                },
            )
        if request.url.path.startswith(PREFIX + "/incognito/") and request.path_params.get(
            "action"
        ) not in ("start", "end"):
            return error_response(
                404,
                {
                    "code": "not_found",
                    "message": f"no route {request.url.path}",
                    "hint": f"use POST {PREFIX}/incognito/start or {PREFIX}/incognito/end",
                },
            )
        return await handlers[request.method](request)

    return endpoint
