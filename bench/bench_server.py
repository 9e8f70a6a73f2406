"""Benchmark of the MCP server (issue 5).

Figures, each as a ratio against a baseline measured in the same run, plus absolutes:

1. spawn → initialize → tools/list wall time of ``memoir serve`` against a bare hello-world
   ``MCPServer`` on the same SDK (the SDK import alone is most of it);
2. ``query_directives`` latency p50 / p95 at 2,000 directives over stdio and over streamable
   HTTP, with 1 and 10 concurrent clients, against the same core call made in-process (the ratio
   is the cost of the protocol, transport and server layer);
3. idle memory (RSS) of the server process against the hello-world server;
4. the serialized ``tools/list`` size in tokens against the 1,500-token budget.

Run: ``.venv/bin/python bench/bench_server.py [--quick]`` (``--quick``: 500 directives, the
hashing embedder, fewer repetitions).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_ENTRY = "import sys; from server.cli.main import main; sys.argv[0] = 'memoir'; main()"
_HELLO = """
from mcp.server.mcpserver import MCPServer
app = MCPServer("hello")

@app.tool()
def hello(name: str) -> str:
    '''Say hello.'''
    return f"hello {name}"

app.run()
"""

_LAYERS = [
    "1-Presentation",
    "2-Application",
    "3-Domain",
    "4-Persistence",
    "5-Tests",
    "7-Deployment",
]
_TOPICS = [
    "security", "api", "testing", "performance", "caching", "validation", "logging",
    "database", "migrations", "authentication", "authorization", "ui", "docker", "errors",
]  # fmt: skip
_VERBS = ["Validate", "Log", "Cache", "Encrypt", "Paginate", "Retry", "Document", "Test", "Index"]
_OBJECTS = [
    "every request body", "database queries", "user sessions", "API responses", "secrets",
    "background jobs", "feature flags", "form inputs", "migrations", "container images",
]  # fmt: skip
_TASKS = [
    "add a REST endpoint that stores user passwords",
    "write a SQL migration adding an index on orders",
    "build a React form with client-side validation",
    "deploy the service with Docker to Azure",
    "add integration tests for the payment workflow",
    "cache expensive catalog queries",
    "log authentication failures without secrets",
    "paginate the orders API with cursors",
]


def rule_documents(total_directives: int, per_rule: int = 20, seed: int = 7) -> dict[str, str]:
    """Synthetic rule documents in the memoir template, ``per_rule`` directives each."""
    rng = random.Random(seed)
    docs: dict[str, str] = {}
    for r in range(total_directives // per_rule):
        topics = rng.sample(_TOPICS, 3)
        lines = [
            f"# Rule: Bench rule {r}",
            "",
            f"**Layer:** {rng.choice(_LAYERS)}",
            f"**AuthoritativeFor:** {topics[0]}",
            f"**Topics:** {', '.join(topics)}",
            "**Severity:** SHOULD",
            "",
            "## When to Apply",
            f"- Working on {topics[0]} or {topics[1]}",
            "",
            "## Directives",
            "",
        ]
        for d in range(per_rule):
            severity = rng.choice(["MUST", "SHOULD", "SHOULD", "MAY"])
            statement = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)} ({topics[d % 3]} {r}.{d})"
            lines += [
                f"### [{severity}] {statement}",
                f"Applies to {topics[d % 3]} code in rule {r}, directive {d}.",
                "",
                f"**Rationale:** keeps {topics[(d + 1) % 3]} predictable.",
                "",
            ]
        docs[f"bench-{r:03d}.md"] = "\n".join(lines)
    return docs


def env(embedder: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MEMOIR_EMBEDDING__MODEL": embedder,
        "MEMOIR_LOGGING__LEVEL": "warning",
    }


def memoir_cmd(db_url: str, *args: str) -> list[str]:
    return [sys.executable, "-c", _ENTRY, "--db", db_url, "serve", *args]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def startup(command: list[str], environ: dict[str, str], runs: int) -> tuple[float, int]:
    """Median spawn → initialize → tools/list seconds, and the tools/list size in bytes."""
    times: list[float] = []
    size = 0
    for _ in range(runs):
        params = StdioServerParameters(command=command[0], args=command[1:], env=environ)
        started = time.perf_counter()
        async with Client(params, mode="legacy") as client:
            tools = await client.list_tools()
            times.append(time.perf_counter() - started)
        payload = {
            "tools": [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools
            ]
        }
        size = len(json.dumps(payload, separators=(",", ":")))
    return statistics.median(times), size


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def idle_rss(command: list[str], environ: dict[str, str], probe: str | None) -> int:
    """RSS of a stdio server after the handshake (and one call, if ``probe`` names a tool)."""
    proc = subprocess.Popen(
        command, env=environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None

    def rpc(message: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        if "id" in message:
            while json.loads(proc.stdout.readline()).get("id") != message["id"]:  # type: ignore[union-attr]
                pass

    rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}})  # fmt: skip
    rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
    if probe:
        rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": probe, "arguments": {"task": "add a form"}}})  # fmt: skip
    time.sleep(1.0)  # let background loading settle before measuring
    kib = rss_kib(proc.pid)
    proc.stdin.close()
    proc.wait(timeout=60)
    return kib


async def latencies_in_process(db_url: str, embedder: str, scope: str, calls: int) -> list[float]:
    from memory_core.config import load_settings
    from memory_core.service import Memoir

    settings = load_settings({"embedding": {"model": embedder}}, environ={})
    memoir = await Memoir.open(db_url, settings=settings)
    await memoir.embedder.ensure_loaded()
    await memoir.rules.query_directives("warm up", scope=scope)
    out: list[float] = []
    try:
        for i in range(calls):
            started = time.perf_counter()
            await memoir.rules.query_directives(_TASKS[i % len(_TASKS)], scope=scope)
            out.append(time.perf_counter() - started)
    finally:
        await memoir.close()
    return out


async def latencies_over(
    connect: Any, clients: int, calls_per_client: int
) -> tuple[list[float], int]:
    out: list[float] = []
    errors = 0

    async def one(c: int) -> None:
        nonlocal errors
        async with connect() as client:
            await client.call_tool("query_directives", {"task": "warm up"})
            for i in range(calls_per_client):
                started = time.perf_counter()
                result = await client.call_tool(
                    "query_directives", {"task": _TASKS[(c + i) % len(_TASKS)]}
                )
                out.append(time.perf_counter() - started)
                errors += int(bool(result.is_error))

    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(one, c)
    return out, errors


def start_http(
    db_url: str, environ: dict[str, str], workspace: Path
) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        memoir_cmd(db_url, "--transport", "http", "--port", "0", "--workspace", str(workspace)),
        env={**environ, "MEMOIR_LOGGING__LEVEL": "info"},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    found = threading.Event()
    url: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            match = re.search(r"Uvicorn running on (http://\S+)", line)
            if match and not url:
                url.append(match.group(1) + "/mcp")
                found.set()

    threading.Thread(target=pump, daemon=True).start()
    if not found.wait(120):
        proc.kill()
        raise RuntimeError("HTTP server did not start")
    return proc, url[0]


def report(name: str, values: list[float], baseline: list[float], errors: int = 0) -> None:
    p50, p95 = pct(values, 0.5) * 1000, pct(values, 0.95) * 1000
    b50, b95 = pct(baseline, 0.5) * 1000, pct(baseline, 0.95) * 1000
    print(
        f"  {name:<28} p50 {p50:7.2f} ms ({p50 / b50:5.2f}x core)   p95 {p95:7.2f} ms "
        f"({p95 / b95:5.2f}x core)   n={len(values)} errors={errors}"
    )


async def main(quick: bool) -> None:
    from server.logging_setup import configure_logging

    configure_logging("warning")
    embedder = "hash:384" if quick else "local"
    directives = 500 if quick else 2000
    runs = 3 if quick else 7
    calls = 10 if quick else 40
    environ = env(embedder)
    work = Path(tempfile.mkdtemp(prefix="memoir-bench-"))
    project = work / "proj"
    (project / "rules").mkdir(parents=True)
    for name, text in rule_documents(directives).items():
        (project / "rules" / name).write_text(text)
    db_url = f"sqlite:///{work / 'memoir.db'}"
    print(
        f"bench_server ({'quick' if quick else 'full'}): {directives} directives, embedder {embedder}"
    )

    # 1. start-up
    hello = [sys.executable, "-c", _HELLO]
    hello_s, hello_bytes = await startup(hello, environ, runs)
    memoir_s, _ = await startup(memoir_cmd(db_url), environ, runs)
    print(f"spawn -> initialize -> tools/list (median of {runs})")
    print(
        f"  hello-world MCPServer        {hello_s * 1000:7.0f} ms  ({hello_bytes} bytes tools/list)"
    )
    print(
        f"  memoir serve                 {memoir_s * 1000:7.0f} ms  ({memoir_s / hello_s:.2f}x hello-world)"
    )

    # 4. tools/list tokens
    from memory_core.config import load_settings
    from memory_core.tokens import create_token_counter
    from server.mcp_app.app import build_server
    from server.mcp_app.runtime import MemoirRuntime

    app = build_server(MemoirRuntime(load_settings(environ={}), db_url))
    tools = await app.list_tools()
    wire = json.dumps(
        {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]},
        separators=(",", ":"),
    )
    tokens = create_token_counter("tiktoken:o200k_base").count(wire)
    print(f"tools/list: {len(tools)} tools, {len(wire)} bytes, {tokens} o200k tokens "
          f"({tokens / 1500:.2f}x the 1,500-token budget)")  # fmt: skip

    # load the rules through the server itself
    params = StdioServerParameters(
        command=sys.executable,
        args=memoir_cmd(db_url, "--workspace", str(project))[1:],
        env=environ,
    )
    started = time.perf_counter()
    async with Client(params, mode="legacy", read_timeout_seconds=900) as client:
        loaded = await client.call_tool("upsert_markdown", {"paths": ["rules"]})
    took = time.perf_counter() - started
    added = loaded.structured_content["directives_added"] if loaded.structured_content else 0
    print(
        f"upsert over stdio: {added} directives in {took:.1f} s ({added / took:.0f} directives/s)"
    )
    scope = f"project:{project.resolve()}"

    # 2. query latency
    baseline = await latencies_in_process(db_url, embedder, scope, calls)
    print("query_directives latency (core baseline: the same call in-process)")
    report("core, in-process", baseline, baseline)

    def stdio_client() -> Client:
        return Client(
            StdioServerParameters(
                command=sys.executable,
                args=memoir_cmd(db_url, "--workspace", str(project))[1:],
                env=environ,
            ),
            mode="legacy",
        )

    values, errors = await latencies_over(stdio_client, 1, calls)
    report("stdio, 1 client", values, baseline, errors)
    values, errors = await latencies_over(stdio_client, 10, max(3, calls // 10))
    report("stdio, 10 clients (10 procs)", values, baseline, errors)

    proc, url = start_http(db_url, environ, project)
    try:
        values, errors = await latencies_over(lambda: Client(url, mode="legacy"), 1, calls)
        report("http, 1 client", values, baseline, errors)
        values, errors = await latencies_over(
            lambda: Client(url, mode="legacy"), 10, max(3, calls // 10)
        )
        report("http, 10 clients (1 server)", values, baseline, errors)
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    # 3. idle memory
    hello_kib = idle_rss(hello, environ, None)
    memoir_kib = idle_rss(
        memoir_cmd(db_url, "--workspace", str(project)), environ, "detect_context"
    )
    print("idle RSS after handshake (+ one call for memoir)")
    print(f"  hello-world MCPServer        {hello_kib / 1024:7.1f} MiB")
    print(
        f"  memoir serve                 {memoir_kib / 1024:7.1f} MiB  ({memoir_kib / hello_kib:.2f}x)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller and faster")
    anyio.run(main, parser.parse_args().quick)
