"""ingest classifies with the client's own model through MCP sampling when the client offers
it (no API key on the server), and with the offline model otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_testkit import ServerUnderTest
from mcp_types import CreateMessageResult, TextContent

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:The sampling capability is deprecated"),
]


def client_model(requests: list[Any]) -> Any:
    async def sample(_ctx: Any, params: Any) -> CreateMessageResult:
        requests.append(params)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text='{"category": "Operations"}'),
            model="client-model",
        )

    return sample


async def test_ingest_classifies_through_the_clients_model(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path)
    requests: list[Any] = []
    try:
        async with server.client(tmp_path, sampling_callback=client_model(requests)) as client:
            result = await client.call_tool("ingest", {"text": "We deploy on Fridays only."})
    finally:
        await server.close()
    assert not result.is_error
    assert requests, "the server never asked the client's model"
    assert result.structured_content["model"] == "client-model"
    assert result.structured_content["categories"][0].startswith("Operations")


async def test_sampling_is_not_used_when_the_setting_is_off(tmp_path: Path) -> None:
    server = ServerUnderTest(tmp_path, llm={"use_mcp_sampling": False})
    requests: list[Any] = []
    try:
        async with server.client(tmp_path, sampling_callback=client_model(requests)) as client:
            result = await client.call_tool("ingest", {"text": "We deploy on Fridays only."})
    finally:
        await server.close()
    assert not result.is_error and requests == []
    assert result.structured_content["model"] != "client-model"
