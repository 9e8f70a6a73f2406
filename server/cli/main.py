"""``memoir``: the command group, global options and the foundation commands.

Feature commands live in sibling modules (``documents``, ``rules``, ``hierarchy``, ``memory``,
``serve``),
each exposing ``register(cli)``. Settings are built once here and passed down through the click
context; nothing below reads the environment.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import click

from memory_core.config import CONFIG_FILENAME, DEFAULT_DB_FILENAME, Settings, load_settings
from memory_core.errors import MemoirError
from memory_core.input_limits import os_error_as_input_error
from memory_core.redaction import RedactingWriter
from server.cli.output import emit_json, envelope, fail, print_table
from server.logging_setup import configure_logging

if TYPE_CHECKING:
    from memory_core.service import Memoir

__all__ = ["CliState", "cli", "main", "open_and_run", "pass_state"]

T = TypeVar("T")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memoir-mcp")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.1.0+source"


@dataclass
class CliState:
    """What every command receives: the settings and the store URL the user chose."""

    settings: Settings
    db: str | None

    def run(self, fn: Callable[[Any], Awaitable[T]], *, as_json: bool, **open_kwargs: Any) -> T:
        """Open the store, run ``fn(memoir)``, close it; errors become an exit at the edge."""
        return open_and_run(self, fn, as_json=as_json, **open_kwargs)


pass_state = click.make_pass_decorator(CliState)


def open_and_run(
    state: CliState, fn: Callable[[Any], Awaitable[T]], *, as_json: bool, **open_kwargs: Any
) -> T:
    from memory_core.service import Memoir

    async def body() -> T:
        memoir = await Memoir.open(state.db, settings=state.settings, **open_kwargs)
        try:
            return await fn(memoir)
        finally:
            await memoir.close()

    try:
        return anyio.run(body)
    except MemoirError as error:
        fail(error, as_json=as_json)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", "-V", prog_name="memoir")
@click.option(
    "--db", "db", metavar="URL", help="Store URL (sqlite:///path, postgresql://…, mysql://…)."
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Use this memoir.toml.",
)
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default=None)
@click.option("--log-format", type=click.Choice(["console", "json"]), default=None)
@click.pass_context
def cli(
    ctx: click.Context,
    db: str | None,
    config_file: Path | None,
    log_level: str | None,
    log_format: str | None,
) -> None:
    """memoir: memory for coding agents (rules, knowledge, memories) over MCP, CLI and Python."""
    overrides: dict[str, Any] = {"logging": {}}
    if log_level:
        overrides["logging"]["level"] = log_level
    if log_format:
        overrides["logging"]["format"] = log_format
    try:
        settings = load_settings(overrides, config_file=config_file)
    except MemoirError as error:
        fail(error, as_json="--json" in sys.argv)
    except OSError as exc:  # a path the file system refused, deep in a walk
        fail(os_error_as_input_error(exc), as_json="--json" in sys.argv)
    configure_logging(settings.logging.level, settings.logging.format)
    ctx.obj = CliState(settings=settings, db=db)


_TOML_TEMPLATE = """\
# memoir configuration. Precedence: command-line flags > MEMOIR_* environment > this file > defaults.
# Nested keys map to environment variables with a double underscore, e.g. MEMOIR_SEARCH__RRF_K=30.

# Where the store lives. Relative sqlite paths are relative to this file.
database_url = "sqlite:///{db_name}"

# Token counting: "tiktoken:o200k_base" (exact, offline), "tiktoken:cl100k_base" or "chars4".
# tokenizer = "tiktoken:o200k_base"

[embedding]
# "local" (all-MiniLM-L6-v2 via ONNX, offline, 384 dims), "hash:384" (deterministic, for tests),
# or any pydantic-ai provider string such as "openai:text-embedding-3-small" (set dimension too).
# Changing it on an existing store requires `memoir reembed`.
# model = "local"
# dimension = 384

[storage]
# busy_timeout_ms = 5000
# write_retries = 5
# secure_delete = true             # deleted text leaves the file and the WAL
# integrity_check_interval_s = 300.0 # quick_check on open and this often before a write
# run_retention_days = 30.0        # older query / ingest runs are deleted
# run_log_text = "redacted"        # redacted | none: what runs keep of a task or question

[logging]
# level = "warning"     # debug | info | warning | error
# format = "console"    # console | json (always to stderr)

[documents]
# chunk_tokens = 200
# overlap_tokens = 32

[search]
# fusion = "weighted"   # weighted | rrf
# rrf_k = 60
# bm25_weight = 0.5
# vector_weight = 0.5
# max_limit = 50

[rules]
# token_budget = 900
# max_items = 50

[hierarchy]
# depth = 3
# max_categories = 128
# strategy = "one_shot"   # one_shot | wide_branch | zoom_in | branch_out
# offline_classifier = "clusters"   # with no model: clusters | names
# max_ingest_bytes = 524288         # the largest text one ingest takes

[llm]
# model = "offline"       # or "openai:gpt-4o-mini" (pip install 'memoir-mcp[openai]'),
#                         # "anthropic:claude-sonnet-4-5" ([anthropic]), "ollama:llama3.2" ([openai])
# use_mcp_sampling = true

[server]
# transport = "stdio"     # stdio | sse | http
# host = "127.0.0.1"      # another address needs [[server.auth.tokens]] or [server.auth.oauth]
# port = 8765
# Also: workspaces (project folders this server may read; MCP roots only narrow them),
# allowed_hosts / allowed_origins (names accepted besides the server's own), and bearer
# tokens: `memoir token new NAME` prints a token and the [[server.auth.tokens]] entry to
# paste here (only its hash). See docs/security.md.

[limits]
# filter_depth = 64       # FEL / RQL nesting
# filter_terms = 256      # FEL / RQL terms
# path_chars = 4096
# stdin_bytes = 10485760
# request_bytes = 4194304
"""


@cli.command()
@click.argument("path", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_state
def init(state: CliState, path: Path, as_json: bool) -> None:
    """Create a store (memoir.db, mode 0600) and a commented memoir.toml in PATH.

    With ``--db sqlite:///FILE``, the store is FILE and memoir.toml records it (relative to PATH
    when inside it), so every command run under PATH (and ``memoir serve`` started there)
    opens that same file.
    """
    path = path.expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    config = path / CONFIG_FILENAME
    wrote_config = False
    if not config.exists():
        config.write_text(
            _TOML_TEMPLATE.format(db_name=_recorded_db(state.db, path)), encoding="utf-8"
        )
        wrote_config = True
    db_url = state.db or f"sqlite:///{path / DEFAULT_DB_FILENAME}"
    settings = load_settings(config_file=config)
    state = CliState(settings=settings, db=db_url)

    async def create(memoir: Memoir) -> dict[str, Any]:
        return await memoir.stats()

    stats = state.run(create, as_json=as_json)
    if as_json:
        emit_json(envelope(store=stats, config_file=str(config), created_config=wrote_config))
        return
    click.echo(f"store:  {stats['url']}")
    click.echo(f"config: {config}{'' if wrote_config else ' (kept the existing file)'}")


def _recorded_db(db: str | None, folder: Path) -> str:
    """The sqlite path memoir.toml records for ``--db`` (relative to its folder when inside)."""
    if not db or not db.startswith("sqlite:///"):
        return DEFAULT_DB_FILENAME
    file = Path(db.removeprefix("sqlite:///")).expanduser().resolve()
    return str(file.relative_to(folder)) if file.is_relative_to(folder) else str(file)


def _print_stats(stats: dict[str, Any]) -> None:
    embedder = stats["embedder"]
    click.echo(f"store        {stats['url']}")
    size = stats["file_bytes"]
    click.echo(
        f"file size    {size if size is not None else '-'} bytes (WAL {stats['wal_bytes'] or 0})"
    )
    click.echo(f"journal      {stats['journal_mode']}")
    click.echo(
        f"embedder     {embedder['id']} ({embedder['dimension']} dims), {stats['vectors']} vectors"
    )
    click.echo(
        f"sqlite       {stats['sqlite_version']}, sqlite-vec {stats['sqlite_vec_version']}, "
        f"FTS5 {'yes' if stats['fts5'] else 'no'}, extensions via {stats['extension_loading']}"
    )
    click.echo(f"migrations   {', '.join(stats['schema_migrations'])}")
    print_table(["table", "rows"], sorted(stats["counts"].items()))
    if stats.get("documents"):
        print_table(["documents", "value"], sorted(stats["documents"].items()))
    if stats["items_by_kind"]:
        print_table(["item kind", "items"], sorted(stats["items_by_kind"].items()))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_state
def stats(state: CliState, as_json: bool) -> None:
    """Counts, file size, embedder, SQLite / sqlite-vec versions of the store."""
    started = time.perf_counter()

    async def collect(memoir: Memoir) -> dict[str, Any]:
        result: dict[str, Any] = await memoir.stats()
        result["documents"] = (await memoir.documents.stats(scope=None))["documents"]
        return result

    result = state.run(collect, as_json=as_json, create=False, check_embedder=False)
    if as_json:
        took = round((time.perf_counter() - started) * 1000, 2)
        emit_json(envelope(store=result, stats={"took_ms": took}))
    else:
        _print_stats(result)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_state
def doctor(state: CliState, as_json: bool) -> None:
    """Check integrity, index consistency, the embedder and file permissions; suggest fixes."""
    from memory_core.service import diagnose, resolve_database_url

    try:
        url = resolve_database_url(state.settings, state.db)
        report = anyio.run(lambda: diagnose(url, state.settings))
    except MemoirError as error:
        fail(error, as_json=as_json)
    if as_json:
        emit_json(envelope(report.ok, store=url, **report.as_dict()))
    else:
        marks = {"ok": "ok", "warning": "WARN", "error": "FAIL"}
        for finding in report.findings:
            click.echo(f"[{marks[finding.status]:>4}] {finding.check}: {finding.message}")
            if finding.fix and finding.status != "ok":
                click.echo(f"       fix: {finding.fix}")
        click.echo("healthy" if report.ok else "problems found")
    if not report.ok:
        sys.exit(1)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_state
def reembed(state: CliState, as_json: bool) -> None:
    """Re-embed every item with the configured embedder and rebuild the search indexes."""
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if not as_json and sys.stderr.isatty():
            click.echo(f"\rre-embedding {done}/{total}", err=True, nl=done >= total)

    async def run(memoir: Memoir) -> int:
        return int(await memoir.reembed(progress=progress))

    count = state.run(run, as_json=as_json, check_embedder=False)
    took = round((time.perf_counter() - started) * 1000, 1)
    model = state.settings.embedding.model
    if as_json:
        emit_json(envelope(reembedded=count, embedder=model, stats={"took_ms": took}))
    else:
        click.echo(f"re-embedded {count} items with {model} in {took} ms")


def _register_features() -> None:
    # Each feature module owns its commands; a missing optional module must not break the CLI.
    import importlib

    for name in ("documents", "rules", "hierarchy", "memory", "serve", "tokens", "layer"):
        try:
            module = importlib.import_module(f"server.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"server.cli.{name}":
                continue
            raise
        module.register(cli)


_register_features()


def main() -> None:
    """Console-script entry point.

    Everything the commands print passes through the redactor (stdout and stderr are wrapped:
    a key stored by mistake is never printed back), and a ``MemoirError`` that escapes a
    command still ends as a clean error with its hint, never a traceback.
    """
    sys.stdout = RedactingWriter(sys.stdout)  # type: ignore[assignment]
    sys.stderr = RedactingWriter(sys.stderr)  # type: ignore[assignment]
    try:
        cli(prog_name="memoir", standalone_mode=True)
    except MemoirError as error:
        fail(error, as_json="--json" in sys.argv)
    except OSError as exc:  # a path the file system refused, deep in a walk
        fail(os_error_as_input_error(exc), as_json="--json" in sys.argv)


if __name__ == "__main__":  # pragma: no cover
    main()
