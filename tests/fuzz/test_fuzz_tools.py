"""Generated arguments for every MCP tool, sent over the real stdio transport to a real
``memoir serve`` process (Hypothesis, derandomized and bounded in examples).

For every call: never a crash ("Error executing tool" with no reason) or a traceback, never an
error dressed as success (a success validates against the tool's output schema), every error
names what to fix (an argument of the tool, or a hint); and afterwards nothing that was stored
before the fuzzing is lost.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import jsonschema
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_testkit import roots_callback, serve_command, server_env
from trust_kit import git_project

from server.mcp_app.tools import DEFAULT_TOOLS, EXTRA_TOOLS

_WAIT_S = 60
SEEDED_FACT = "The nightly backup runs at 02:30 UTC to the Frankfurt bucket."
EXAMPLES = 25

# Strings that have broken servers before: traversal, absolute paths, huge names, control
# characters, filter syntax, unicode, and empty or blank text.
_NASTY = st.sampled_from(
    [
        "",
        " ",
        "../../etc/passwd",
        "/etc/shadow",
        "file:///",
        "a/" * 300,
        "b" * 300,
        "\x00\x01\x1b[2J",
        "NOT " * 200 + "doc.path = 'x'",
        "(" * 200,
        "'; DROP TABLE item; --",
        "𝕞𝕖𝕞𝕠𝕚𝕣 ✓ 日本語",
        "rules/../../outside.md",
        "${HOME}/.bashrc",
    ]
)
_TEXT = st.one_of(_NASTY, st.text(max_size=300))
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=8,
)


def _value_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    options: list[st.SearchStrategy[Any]] = [_JSON]
    if "string" in kinds:
        options.append(_TEXT)
    if "integer" in kinds:
        options.append(st.integers(-100, 100_000))
    if "boolean" in kinds:
        options.append(st.booleans())
    if "array" in kinds:
        options += [st.lists(_TEXT, max_size=4), st.lists(_NASTY, min_size=1, max_size=3)]
    if "enum" in schema:
        options.append(st.sampled_from([v for v in schema["enum"] if v is not None] or [None]))
    return st.one_of(options)


def _arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props = schema.get("properties", {})
    known = st.fixed_dictionaries(
        {}, optional={name: _value_for(prop) for name, prop in props.items()}
    )
    extra = st.dictionaries(
        st.sampled_from(["budget", "limit", "scope", "path", "x"]), _JSON, max_size=2
    )
    return st.one_of(known, st.builds(lambda a, b: {**a, **b}, known, extra))


@pytest.fixture(scope="module")
def connected(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[BlockingPortal, Client, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("fuzz-tools")
    project = git_project(root / "project", rules=("api-design.md",))
    command = serve_command(
        f"sqlite:///{root / 'memoir.db'}", "--workspace", str(project), "--extra-tools"
    )
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=server_env(MEMOIR_SERVER__RATE_LIMIT_PER_MINUTE="0"),
        cwd=str(root),
    )
    client_cm = Client(params, mode="legacy", list_roots_callback=roots_callback(project))
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(client_cm) as client:
        loaded = portal.call(client.call_tool, "upsert_markdown", {"paths": ["rules"]})
        assert not loaded.is_error
        saved = portal.call(client.call_tool, "ingest", {"text": SEEDED_FACT})
        assert not saved.is_error
        tools = {t.name: t for t in portal.call(client.list_tools).tools}
        yield portal, client, tools


def _call(portal: BlockingPortal, client: Client, name: str, arguments: dict[str, Any]) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(_WAIT_S):
            try:
                return await client.call_tool(name, arguments)
            except MCPError as error:
                return error

    return portal.call(bounded)


def _check(tool: Any, arguments: dict[str, Any], outcome: Any) -> None:
    params = set(tool.input_schema.get("properties", {}))
    if isinstance(outcome, MCPError):  # a protocol refusal: it must say which argument
        message = outcome.error.message
        assert any(p in message for p in params | set(arguments)), message
        return
    text = "\n".join(getattr(block, "text", "") for block in outcome.content)
    assert "Traceback" not in text
    if outcome.is_error:
        assert text.strip()
        assert text.strip() != f"Error executing tool {tool.name}", "a crash with no reason"
        assert "Hint:" in text or any(p in text for p in params), text[:500]
    else:
        assert outcome.structured_content is not None, text[:500]
        jsonschema.validate(outcome.structured_content, tool.output_schema)


# Inputs that crashed or misled the server before (issue 14), replayed before the generated ones.
_KNOWN_HOSTILE: dict[str, list[dict[str, Any]]] = {
    "upsert_markdown": [
        {"paths": ["b" * 300]},
        {"paths": ["a/" * 2500]},
        {"paths": ["/etc/passwd", "../../outside.md"]},
    ],
    "query_directives": [{"task": "add a form", "budget": 100}, {"task": "x" * 20000}],
    "ingest": [{"text": "\x00" * 10}, {"text": "note", "source": "s" * 5000}],
    "query": [{"question": "(" * 3000}],
    "search": [{"text": "NOT " * 5000}],
}


@pytest.mark.parametrize("name", [*DEFAULT_TOOLS, *EXTRA_TOOLS])
def test_generated_arguments_never_crash_a_tool(
    connected: tuple[BlockingPortal, Client, dict[str, Any]], name: str
) -> None:
    portal, client, tools = connected
    tool = tools[name]
    for arguments in _KNOWN_HOSTILE.get(name, []):
        _check(tool, arguments, _call(portal, client, name, arguments))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(arguments=_arguments(tool.input_schema))
    def run(arguments: dict[str, Any]) -> None:
        _check(tool, arguments, _call(portal, client, name, arguments))

    run()


def test_nothing_stored_before_the_fuzzing_is_lost(
    connected: tuple[BlockingPortal, Client, dict[str, Any]],
) -> None:
    portal, client, _ = connected
    rules = _call(portal, client, "list_rules", {})
    answer = _call(portal, client, "query", {"question": "when does the nightly backup run?"})
    assert "api-design" in [r["rule_id"] for r in rules.structured_content["rules"]]
    assert "02:30" in str(answer.structured_content)
