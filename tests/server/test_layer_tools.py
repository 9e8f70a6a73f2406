"""The memory layer's MCP tools (issue 12), ``memoir serve`` as a real subprocess over stdio
with the SDK client: ``memorize`` / ``retrieve`` appear only with ``server.extra_tools`` and a
``server.layer_file``, and the layer, its store and its boundary come from the server's
configuration, never from the client. The boundary test runs with the layer's store on a SQLite
file, a PostgreSQL schema and ``store = ":memory:"`` (there the other organisation's item cannot
be written beforehand: the store lives in the server process only)."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_testkit import serve_command, server_env, start_http_server, stop_http_server
from pydantic import create_model
from store_testkit import start_pgserver
from trust_kit import Token, mcp_client, write_config

from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer.sqlite import SqliteLayerStore
from server.mcp_app.layer_tools import LAYER_TOOLS
from server.mcp_app.tools import DEFAULT_TOOLS, EXTRA_TOOLS
from tests.pipeline.conftest import fresh_pg_schema

pytestmark = pytest.mark.anyio

_WAIT_S = 90
LAYER = """
store = {store}
scope_fields = ["org_id", "user_id"]
boundary_fields = ["org_id"]
embedder = "hash:256"
categories = [
  { key = "preferences", name = "Preferences", description = "likes, habits, food and drink" },
  { key = "work", name = "Work", description = "projects, deadlines, migrations, APIs" },
]
"""
TEA = [{"role": "user", "content": "I always drink green tea in the afternoon."}]


@pytest.fixture(scope="module")
def pg_admin_url() -> str:
    return start_pgserver()


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        pytest.param("memory", id="memory"),
    ]
)
def layer_store(request: pytest.FixtureRequest) -> str:
    """The layer file's ``store``: a SQLite file (relative to the layer file), a PostgreSQL
    schema's URL, or ``:memory:``."""
    if request.param == "postgres":
        return fresh_pg_schema(request.getfixturevalue("pg_admin_url"))
    return {"sqlite": "layer.db", "memory": ":memory:"}[str(request.param)]


def _server(
    tmp_path: Path,
    fixed: str,
    store: str = "layer.db",
    *,
    layer_extra: str = "",
    config_extra: str = "",
) -> StdioServerParameters:
    (tmp_path / "memoir-layer.toml").write_text(
        LAYER.replace("{store}", json.dumps(store)) + layer_extra
    )
    config = tmp_path / "memoir.toml"
    config.write_text(
        f'[server]\nextra_tools = true\nlayer_file = "memoir-layer.toml"\n\n'
        f"[server.layer_scope]\n{fixed}\n{config_extra}"
    )
    command = serve_command(f"sqlite:///{tmp_path / 'memoir.db'}", config=config)
    return StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(), cwd=str(tmp_path)
    )


def _layer_service(tmp_path: Path, store: str) -> MemoryService:
    """The layer's store opened through the Python API (beside the server)."""
    if store.startswith("postgresql"):
        metadata: dict[str, Any] = {"provider": "postgres", "url": store}
    else:
        metadata = {"provider": "sqlite", "path": str(tmp_path / store)}
    scope = create_model("LayerScope", org_id=(str, ...), user_id=(str, ...))
    return MemoryService.create(
        scope_model=scope,
        categories=["Preferences", "Work"],
        storage_providers={"metadata_store": metadata},
        boundary_fields=["org_id"],
        embedder="hash:256",
    )


def _other_org_remembers_tea(tmp_path: Path, store: str) -> None:
    """Another organisation's item in the same layer store, written through the Python API."""
    service = _layer_service(tmp_path, store)
    service.memorize({"org_id": "evil", "user_id": "eve"}, conversation=TEA)
    service.close()


def _stored_texts(tmp_path: Path, store: str, org_id: str, user_id: str) -> list[str]:
    service = _layer_service(tmp_path, store)
    try:
        return [i.text for i in service.store.items({"org_id": (org_id,), "user_id": (user_id,)})]
    finally:
        service.close()


def _error(result: Any) -> str:
    assert result.is_error, result
    return str(result.content[0].text)


async def test_memorize_and_retrieve_stay_inside_the_server_fixed_boundary(
    tmp_path: Path, layer_store: str
) -> None:
    if layer_store != ":memory:":
        _other_org_remembers_tea(tmp_path, layer_store)
    server = _server(tmp_path, 'org_id = "acme"', layer_store)
    with anyio.fail_after(_WAIT_S):
        async with Client(server, mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            stored = await client.call_tool(
                "memorize", {"conversation": TEA, "scope": {"user_id": "alice"}}
            )
            again = await client.call_tool(
                "memorize", {"conversation": TEA, "scope": {"user_id": "alice"}}
            )
            found = await client.call_tool(
                "retrieve", {"query": "green tea", "scope": {"user_id": "*"}}
            )
            widened = await client.call_tool(
                "retrieve", {"query": "green tea", "scope": {"org_id": "*", "user_id": "*"}}
            )
            other = await client.call_tool(
                "retrieve", {"query": "green tea", "scope": {"org_id": "evil", "user_id": "eve"}}
            )
            listed = await client.call_tool(
                "retrieve",
                {"query": "green tea", "scope": {"org_id": ["acme", "evil"], "user_id": "*"}},
            )
            into_other = await client.call_tool(
                "memorize",
                {"content": "Eve's secret plan.", "scope": {"org_id": "evil", "user_id": "m"}},
            )
            a_file = await client.call_tool(
                "memorize", {"uri": "/etc/passwd", "scope": {"user_id": "alice"}}
            )
    assert list(tools) == [*DEFAULT_TOOLS, *EXTRA_TOOLS, *LAYER_TOOLS]
    # nothing a client passes chooses the store, the file system or the boundary
    assert set(tools["memorize"].input_schema["properties"]) == {
        "content",
        "conversation",
        "scope",
    }
    assert set(tools["retrieve"].input_schema["properties"]) == {"query", "scope"}
    assert not stored.is_error and stored.structured_content["items_added"]
    assert stored.structured_content["scope"] == {"org_id": "acme", "user_id": "alice"}
    assert again.structured_content["duplicate"] is True
    assert not found.is_error
    assert found.structured_content["scope"] == {"org_id": "acme", "user_id": "ANY"}
    texts = [i["text"] for i in found.structured_content["items"]]
    assert texts and all("green tea" in t for t in texts)
    assert {i["scope"]["org_id"] for i in found.structured_content["items"]} == {"acme"}
    for refused in (widened, other, listed, into_other):
        message = _error(refused)
        assert "'org_id' is fixed to 'acme'" in message and "leave 'org_id' out" in message
    assert a_file.is_error  # no such argument: the server never reads a client-named file
    if layer_store != ":memory:":  # the server wrote into the store its layer file names
        assert any("green tea" in t for t in _stored_texts(tmp_path, layer_store, "acme", "alice"))


async def test_a_layer_whose_boundary_the_server_leaves_open_is_refused(tmp_path: Path) -> None:
    with anyio.fail_after(_WAIT_S):
        async with Client(_server(tmp_path, 'user_id = "alice"'), mode="legacy") as client:
            result = await client.call_tool(
                "retrieve", {"query": "tea", "scope": {"org_id": "acme"}}
            )
    message = _error(result)
    assert "leaves the boundary fields ['org_id']" in message and "layer_scope" in message


@pytest.mark.parametrize(
    ("store", "cause"),
    [
        pytest.param(
            "no/such/folder/layer.db", "unable to open database file", id="sqlite-no-folder"
        ),
        pytest.param("junk.db", "is not a SQLite database", id="sqlite-not-a-database"),
        pytest.param(
            "postgresql://ann:s3cret@127.0.0.1:1/layer",
            "cannot connect to PostgreSQL",
            id="postgres",
        ),
    ],
)
async def test_a_layer_store_that_cannot_be_opened_is_named_with_its_cause_and_fix(
    tmp_path: Path, store: str, cause: str
) -> None:
    (tmp_path / "junk.db").write_bytes(b"not a database, only text " * 200)
    with anyio.fail_after(_WAIT_S):
        async with Client(_server(tmp_path, 'org_id = "acme"', store), mode="legacy") as client:
            result = await client.call_tool(
                "memorize", {"content": "tea", "scope": {"user_id": "a"}}
            )
    message = _error(result)
    assert message.startswith(
        f"the memory layer of {tmp_path / 'memoir-layer.toml'} cannot be opened: "
    )
    assert cause in message and "\nHint: " in message
    assert "s3cret" not in message and "s3cret" not in json.dumps(result.structured_content)


async def test_any_other_failure_to_open_the_layer_is_a_tool_error_naming_the_layer_file(
    tmp_path: Path,
) -> None:
    server = _server(tmp_path, 'org_id = "acme"')
    layer = tmp_path / "memoir-layer.toml"
    layer.write_text(layer.read_text().replace('{ key = "work"', '7, { key = "work"', 1))
    with anyio.fail_after(_WAIT_S):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool(
                "memorize", {"content": "tea", "scope": {"user_id": "a"}}
            )
    message = _error(result)
    assert message.startswith(f"the memory layer of {layer} cannot be opened: TypeError: ")
    assert f"\nHint: check {layer}" in message
    assert result.structured_content["error"]["code"] == "storage_error"


async def test_the_layer_tools_use_memoir_toml_profiles_the_layer_file_names(
    tmp_path: Path,
) -> None:
    profiles = '\n[llm.profiles.fast]\nmodel = "test"\n'
    uses = '\n[llm_providers.default]\nmemoir_profile = "fast"\n'
    server = _server(tmp_path, 'org_id = "acme"', layer_extra=uses, config_extra=profiles)
    with anyio.fail_after(_WAIT_S):
        async with Client(server, mode="legacy") as client:
            stored = await client.call_tool(
                "memorize", {"conversation": TEA, "scope": {"user_id": "a"}}
            )
    assert not stored.is_error, stored.content
    store = SqliteLayerStore(tmp_path / "layer.db")
    try:
        usage = store.runs(1)[0].body["llm_usage"]["extract_items"][0]
    finally:
        store.close()
    assert (usage["profile"], usage["model"], usage["requests"]) == ("default", "test", 1)

    missing = '\n[llm_providers.default]\nmemoir_profile = "big"\n'
    server = _server(tmp_path, 'org_id = "acme"', layer_extra=missing, config_extra=profiles)
    with anyio.fail_after(_WAIT_S):
        async with Client(server, mode="legacy") as client:
            refused = await client.call_tool(
                "retrieve", {"query": "tea", "scope": {"user_id": "a"}}
            )
    message = _error(refused)
    assert "reuses the memoir profile 'big', which memoir.toml does not define" in message
    assert "(defined: default, fast)" in message and "[llm.profiles.big]" in message


HOOK = '\nauthorise = "tests.pipeline.layer_hooks:caller_owns_user_id"\n'


async def test_over_stdio_the_hook_sees_the_local_os_user_and_can_refuse(tmp_path: Path) -> None:
    me = f"local:{pwd.getpwuid(os.getuid()).pw_name}"  # the server has no USER / LOGNAME
    server = _server(tmp_path, 'org_id = "acme"', layer_extra=HOOK)
    with anyio.fail_after(_WAIT_S):
        async with Client(server, mode="legacy") as client:
            mine = await client.call_tool(
                "memorize", {"conversation": TEA, "scope": {"user_id": me}}
            )
            found = await client.call_tool(
                "retrieve", {"query": "green tea", "scope": {"user_id": me}}
            )
            other = await client.call_tool(
                "memorize", {"conversation": TEA, "scope": {"user_id": "bob"}}
            )
            any_user = await client.call_tool(
                "retrieve", {"query": "green tea", "scope": {"user_id": "*"}}
            )
    assert not mine.is_error and mine.structured_content["items_added"]
    assert not found.is_error and found.structured_content["items"]
    seen = json.dumps({"authenticated": False, "id": me, "transport": "stdio"}, sort_keys=True)
    for refused in (other, any_user):
        message = _error(refused)
        assert "access denied on scope field 'user_id'" in message
        assert f"principal {seen} may not use" in message


async def test_over_http_the_hook_sees_the_tokens_client_and_can_refuse(tmp_path: Path) -> None:
    alice = Token.make("alice")
    (tmp_path / "memoir-layer.toml").write_text(LAYER.replace("{store}", '"layer.db"') + HOOK)
    config = write_config(
        tmp_path / "etc",
        tokens=(alice,),
        extra=f'[server]\nextra_tools = true\nlayer_file = "{tmp_path / "memoir-layer.toml"}"\n\n'
        '[server.layer_scope]\norg_id = "acme"',
    )
    server = start_http_server(tmp_path, "http", config=config)
    try:
        with anyio.fail_after(_WAIT_S):
            async with mcp_client(server.mcp_url, token=alice.value) as client:
                mine = await client.call_tool(
                    "memorize", {"conversation": TEA, "scope": {"user_id": "alice"}}
                )
                other = await client.call_tool(
                    "retrieve", {"query": "green tea", "scope": {"user_id": "bob"}}
                )
    finally:
        assert stop_http_server(server) == 0, "".join(server.stderr)
    assert not mine.is_error and mine.structured_content["items_added"]
    message = _error(other)
    seen = json.dumps({"authenticated": True, "id": "alice", "transport": "http"}, sort_keys=True)
    assert f"principal {seen} may not use 'bob'" in message


async def test_a_hook_that_cannot_be_imported_is_a_tool_error_naming_it(tmp_path: Path) -> None:
    hook = '\nauthorise = "no_such_package.guards:tenant_guard"\n'
    server = _server(tmp_path, 'org_id = "acme"', layer_extra=hook)
    with anyio.fail_after(_WAIT_S):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool("memorize", {"content": "x", "scope": {"user_id": "a"}})
    message = _error(result)
    assert "no_such_package.guards:tenant_guard" in message
    assert "module 'no_such_package.guards' cannot be imported" in message
