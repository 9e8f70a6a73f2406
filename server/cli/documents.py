"""Recall's commands: ``add``, ``rm``, ``search``, ``query``, ``context``, ``compact``, ``export``,
``import``. Thin over ``memoir.documents`` (:class:`memory_core.documents.service.DocumentService`).

Human tables by default; ``--json`` prints the spec's response shape. The scope is ``--scope``,
else the configured workspace, else the git root of the working directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memory_core.errors import InvalidInputError, MemoirError
from server.cli.main import CliState, pass_state
from server.cli.output import (
    emit_json,
    envelope,
    exit_code_for,
    fail,
    print_table,
    unredacted_stdout,
)

if TYPE_CHECKING:
    from memory_core.retrieval.engine import SearchMode
    from memory_core.service import Memoir

__all__ = ["register"]

_SNIPPET = 90


def _scope(state: CliState, explicit: str | None) -> str:
    from memory_core.scope import resolve_scope

    return resolve_scope(explicit, workspace=state.settings.server.workspace, cwd=Path.cwd())


def _scope_option(fn: Any) -> Any:
    return click.option(
        "--scope",
        default=None,
        metavar="SCOPE",
        help="Scope of the documents (default: the project of the working directory).",
    )(fn)


def _json_option(fn: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")(fn)


async def _ready(memoir: Memoir, mode: str) -> None:
    # A one-shot command waits for the model: the engine's lexical fallback while the
    # embedder loads exists for servers, and would make every CLI search lexical-only.
    if mode != "lexical":
        await memoir.embedder.ensure_loaded()


_SIZE_SETTING = "documents.max_file_bytes"


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET else flat[: _SNIPPET - 1] + "…"


def _print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


class _Progress:
    """Progress on stderr: a bar on a terminal, one JSON object per file under --json
    (``{"event": "progress", "files_done": …, "files_total": …, "path": …}``), else nothing."""

    def __init__(self, *, as_json: bool) -> None:
        self.as_json = as_json
        self.enabled = as_json or sys.stderr.isatty()
        self.bar: Any = None

    def __call__(self, done: int, total: int, path: str) -> None:
        if not self.enabled or total == 0:
            return
        if self.as_json:
            line = {"event": "progress", "files_done": done, "files_total": total, "path": path}
            sys.stderr.write(json.dumps(line) + "\n")
            sys.stderr.flush()
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, label="ingesting", file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.bar.pos)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@click.command("add")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--glob", "globs", multiple=True, help="Only files matching (e.g. '**/*.md').")
@click.option("--ignore", "ignores", multiple=True, help="Skip files matching (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Tag the documents (repeatable).")
@click.option("--source", default=None, help="Where the documents come from (doc.source).")
@click.option("--mtime-only", is_flag=True, help="Skip files whose mtime and size are unchanged.")
@click.option("--parser", default=None, help="Reserved (no effect yet).")
@click.option("--text", default=None, help="Ingest this text instead of files (needs --path).")
@click.option("--path", "virtual_path", default=None, help="Virtual path for --text.")
@_scope_option
@_json_option
@pass_state
def add_command(
    state: CliState,
    paths: tuple[Path, ...],
    globs: tuple[str, ...],
    ignores: tuple[str, ...],
    tags: tuple[str, ...],
    source: str | None,
    mtime_only: bool,
    parser: str | None,
    text: str | None,
    virtual_path: str | None,
    scope: str | None,
    as_json: bool,
) -> None:
    """Ingest files and folders (or --text with --path): chunk, embed, index."""
    if text is not None or virtual_path is not None:
        if text is None or virtual_path is None or paths:
            fail(
                InvalidInputError(
                    "--text and --path go together, without file arguments",
                    hint='memoir add --text "…" --path notes/topic.md',
                ),
                as_json=as_json,
            )
    elif not paths:
        fail(
            InvalidInputError("nothing to add", hint="memoir add <path...> or --text … --path …"),
            as_json=as_json,
        )
    progress = _Progress(as_json=as_json)

    async def run(memoir: Memoir) -> Any:
        target = _scope(state, scope)
        if text is not None and virtual_path is not None:
            return await memoir.documents.add_text(
                text, path=virtual_path, scope=target, tags=tags, source=source
            )
        return await memoir.documents.add_paths(
            list(paths),
            scope=target,
            globs=globs,
            ignores=ignores,
            tags=tags,
            source=source,
            mtime_only=mtime_only,
            parser=parser,
            progress=progress,
        )

    try:
        report = state.run(run, as_json=as_json)
    finally:
        progress.close()
    too_large = [d.reason for d in report.documents if d.reason and _SIZE_SETTING in d.reason]
    if too_large and not (report.added or report.updated or report.unchanged):
        # Everything named was over the size limit: nothing was stored, so it is an error.
        fail(
            InvalidInputError(
                f"nothing was added: {too_large[0].removeprefix('skipped ').split(';')[0]}",
                hint=f"split the file, or raise {_SIZE_SETTING} in memoir.toml "
                "(MEMOIR_DOCUMENTS__MAX_FILE_BYTES)",
                details={"skipped": too_large},
            ),
            as_json=as_json,
        )
    if as_json:
        emit_json(report.to_json())
        return
    _print_warnings(report.warnings)
    click.echo(
        f"added {report.added}, updated {report.updated}, unchanged {report.unchanged}, "
        f"skipped {report.skipped}; {report.chunks} chunks written"
    )


@click.command("rm")
@click.argument("targets", nargs=-1)
@click.option("--purge", is_flag=True, help="Drop the tombstones now (as compact does).")
@click.option(
    "--chunk", "chunks", multiple=True, help="Knowledge: remove this chunk (id; repeatable)."
)
@click.option("--source", help="Knowledge: remove every chunk ingested from this file or source.")
@click.option("--category", help='Knowledge: remove a category and its subtree (id or "A / B").')
@_scope_option
@_json_option
@pass_state
def rm_command(
    state: CliState,
    targets: tuple[str, ...],
    purge: bool,
    chunks: tuple[str, ...],
    source: str | None,
    category: str | None,
    scope: str | None,
    as_json: bool,
) -> None:
    """Remove documents by id or path (a target with a '/' or naming a file is a path), or
    ingested knowledge with --chunk, --source or --category."""
    knowledge = bool(chunks) or source is not None or category is not None
    if knowledge == bool(targets):
        fail(
            InvalidInputError(
                "give documents to remove, or --chunk / --source / --category for knowledge",
                hint="memoir rm docs/a.md  |  memoir rm --source notes.md  |  "
                "memoir rm --category 'Databases / Indexing'",
            ),
            as_json=as_json,
        )
    if knowledge:
        _rm_knowledge(state, chunks, source, category, scope, as_json)
        return

    async def run(memoir: Memoir) -> Any:
        return await memoir.documents.remove(list(targets), scope=_scope(state, scope), purge=purge)

    report = state.run(run, as_json=as_json)
    if as_json:
        emit_json(report.to_json())
        return
    _print_warnings(report.warnings)
    print_table(["doc id", "path"], [(d.doc_id, d.path) for d in report.removed])
    if report.purged:
        click.echo(f"purged {report.purged['documents']} documents")


def _rm_knowledge(
    state: CliState,
    chunks: tuple[str, ...],
    source: str | None,
    category: str | None,
    scope: str | None,
    as_json: bool,
) -> None:
    if source is not None and Path(source).expanduser().is_file():
        source = str(Path(source).expanduser().resolve())  # files are recorded by full path

    async def run(memoir: Memoir) -> Any:
        return await memoir.hierarchy.forget(
            scope=_scope(state, scope), chunk_ids=list(chunks), source=source, category=category
        )

    removed = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(forget=removed.model_dump()))
        return
    click.echo(
        f"removed {removed.chunks} chunks and {removed.categories} emptied categories "
        f"from scope {removed.scope}"
    )


def _print_results(response: Any) -> None:
    _print_warnings(response.warnings)
    rows = []
    for rank, result in enumerate(response.results or [], start=1):
        doc, chunk = result.doc, result.chunk
        where = doc.path if doc and doc.path else (doc.id if doc else "")
        if chunk and chunk.offset is not None:
            where = f"{where}@{chunk.offset}"
        score = "" if result.score is None else f"{result.score:.4f}"
        rows.append((rank, score, where, _snippet(chunk.text) if chunk and chunk.text else ""))
    print_table(["#", "score", "where", "text"], rows)
    explain = getattr(response, "explain", None)
    if explain:
        for rank, result in enumerate(response.results or [], start=1):
            if result.explain:
                click.echo(f"#{rank} " + json.dumps(result.explain, sort_keys=True))
        click.echo("engine " + json.dumps(explain, sort_keys=True))
    click.echo(f"{response.stats.total_hits} hits in {response.stats.took_ms} ms")


def _print_selected(response: Any) -> None:
    """RQL results as a table of exactly the selected fields (``doc.id`` stays a column, so
    what ``memoir rm`` takes can be read off the table)."""
    _print_warnings(response.warnings)
    rows = [_flatten(result.to_json()) for result in response.results or []]
    columns = list(dict.fromkeys(key for row in rows for key in row if key != "explain"))
    print_table(
        ["#", *columns],
        [
            (rank, *(_cell(column, row.get(column)) for column in columns))
            for rank, row in enumerate(rows, start=1)
        ],
    )
    click.echo(f"{response.stats.total_hits} hits in {response.stats.took_ms} ms")


def _flatten(result: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in result.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": v for inner, v in value.items()})
        else:
            flat[key] = value
    return flat


def _cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column.endswith(".text"):
        return _snippet(str(value))
    if isinstance(value, float):
        return f"{value:.4f}"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _mode(bm25: bool, vector: bool) -> SearchMode:
    if bm25 == vector:
        return "hybrid"
    return "lexical" if bm25 else "semantic"


@click.command("search")
@click.argument("query", required=False)
@click.option("--k", "k", type=int, default=None, help="How many results (default 10).")
@click.option("--bm25", is_flag=True, help="Lexical only.")
@click.option("--vector", is_flag=True, help="Semantic only.")
@click.option("--filter", "filter_text", default=None, help="FEL filter, e.g. \"doc.tag = 'x'\".")
@click.option("--explain", is_flag=True, help="Per-arm scores and ranks, fusion details.")
@click.option("--stdin", "from_stdin", is_flag=True, help="One query per line; JSON lines out.")
@_scope_option
@_json_option
@pass_state
def search_command(
    state: CliState,
    query: str | None,
    k: int | None,
    bm25: bool,
    vector: bool,
    filter_text: str | None,
    explain: bool,
    from_stdin: bool,
    scope: str | None,
    as_json: bool,
) -> None:
    """Hybrid search (BM25 + vectors) over the documents."""
    mode = _mode(bm25, vector)
    if from_stdin:
        if query is not None:
            fail(InvalidInputError("--stdin takes no QUERY argument"), as_json=True)

        async def run_lines(memoir: Memoir) -> int:
            await _ready(memoir, mode)
            failures = 0
            target = _scope(state, scope)
            for line in sys.stdin:
                text = line.rstrip("\n")
                if not text.strip():
                    continue
                try:
                    response = await memoir.documents.search(
                        text, scope=target, k=k, mode=mode, filter=filter_text, explain=explain
                    )
                    payload = response.to_json()
                except MemoirError as error:
                    failures += 1
                    payload = envelope(False, query={"text": text}, error=error.to_dict())
                click.echo(json.dumps(payload, ensure_ascii=False, default=str))
                sys.stdout.flush()
            return failures

        failures = state.run(run_lines, as_json=True)
        sys.exit(1 if failures else 0)
    if query is None:
        fail(
            InvalidInputError("no query", hint="memoir search 'words' (or --stdin)"),
            as_json=as_json,
        )

    async def run(memoir: Memoir) -> Any:
        await _ready(memoir, mode)
        return await memoir.documents.search(
            query,
            scope=_scope(state, scope),
            k=k,
            mode=mode,
            filter=filter_text,
            explain=explain,
        )

    response = state.run(run, as_json=as_json)
    if as_json:
        emit_json(response.to_json())
    else:
        _print_results(response)


@click.command("query")
@click.option("--rql", "rql", required=True, help="An RQL statement, or @file to read one.")
@click.option("--explain", is_flag=True, help="Per-arm scores and ranks, fusion details.")
@_scope_option
@_json_option
@pass_state
def query_command(
    state: CliState, rql: str, explain: bool, scope: str | None, as_json: bool
) -> None:
    """Run a Recall Query Language statement."""
    if rql.startswith("@"):
        path = Path(rql[1:])
        try:
            rql = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(
                InvalidInputError(f"cannot read the RQL file {path}: {exc}"),
                as_json=as_json,
            )

    async def run(memoir: Memoir) -> Any:
        await _ready(memoir, "hybrid")
        return await memoir.documents.query_rql(rql, scope=_scope(state, scope), explain=explain)

    response = state.run(run, as_json=as_json)
    if as_json:
        emit_json(response.to_json())
    else:
        _print_selected(response)
        if response.next_offset is not None:
            click.echo(f"more: OFFSET {response.next_offset}")


@click.command("context")
@click.argument("query")
@click.option("--budget-tokens", type=int, default=1200, show_default=True)
@click.option("--diversity", type=int, default=None, help="At most N chunks per document.")
@click.option("--k", "k", type=int, default=None, help="Candidates to pack from (default 50).")
@click.option("--filter", "filter_text", default=None, help="FEL filter.")
@click.option("--format", "fmt", default=None, help="Reserved (no effect yet).")
@_scope_option
@_json_option
@pass_state
def context_command(
    state: CliState,
    query: str,
    budget_tokens: int,
    diversity: int | None,
    k: int | None,
    filter_text: str | None,
    fmt: str | None,
    scope: str | None,
    as_json: bool,
) -> None:
    """Assemble a deterministic context window within a token budget, with provenance."""

    async def run(memoir: Memoir) -> Any:
        await _ready(memoir, "hybrid")
        return await memoir.documents.context(
            query,
            scope=_scope(state, scope),
            budget_tokens=budget_tokens,
            diversity=diversity,
            k=k,
            filter=filter_text,
        )

    response = state.run(run, as_json=as_json)
    if fmt:
        response.warnings.append(f"--format {fmt!r} is reserved and has no effect yet")
    if as_json:
        emit_json(response.to_json())
        return
    _print_warnings(response.warnings)
    context = response.context
    for chunk in context.chunks:
        mark = " (truncated)" if chunk.truncated else ""
        click.echo(
            f"--- {chunk.path} [{chunk.offset}:{chunk.end_offset}] {chunk.tokens} tokens{mark}"
        )
        click.echo(chunk.text)
    click.echo(f"--- {context.used_tokens}/{context.budget_tokens} tokens")


@click.command("compact")
@_json_option
@pass_state
def compact_command(state: CliState, as_json: bool) -> None:
    """VACUUM, purge tombstones and optimise the indexes."""

    async def run(memoir: Memoir) -> Any:
        return await memoir.documents.compact()

    result = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(**result))
    else:
        click.echo(
            f"purged {result['purged']['documents']} documents; "
            f"{result['bytes_before']} -> {result['bytes_after']} bytes"
        )


@click.command("export")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--all-scopes", is_flag=True, help="Export every scope, not just this one.")
@_scope_option
@pass_state
def export_command(state: CliState, out: Path | None, all_scopes: bool, scope: str | None) -> None:
    """Back up every kind of memory (documents, rules and their graph, knowledge and its
    categories, agent memories) as JSONL: stdout, or --out FILE (created 0600)."""

    async def run(memoir: Memoir) -> Any:
        target = None if all_scopes else _scope(state, scope)
        if out is None:
            # Records are redacted as they are written (vectors untouched): no second pass.
            return await memoir.export(unredacted_stdout(), scope=target)
        return await memoir.export(out, scope=target)

    report = state.run(run, as_json=out is None)
    if out is not None:
        click.echo(f"exported {report.records} records to {out}")


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@_scope_option
@_json_option
@pass_state
def import_command(state: CliState, file: Path, scope: str | None, as_json: bool) -> None:
    """Restore a backup written by `memoir export` (`-` reads stdin). Rows keep their own
    scopes; an older documents-only export goes into the current scope."""

    async def run(memoir: Memoir) -> Any:
        source: Any = sys.stdin if str(file) == "-" else file
        return await memoir.import_(source, scope=_scope(state, scope))

    report = state.run(run, as_json=as_json)
    if hasattr(report, "to_json"):  # a documents-only export
        if as_json:
            emit_json(report.to_json())
            return
        _print_warnings(report.warnings)
        click.echo(
            f"imported {report.documents} documents ({report.unchanged} unchanged), "
            f"{report.chunks} chunks" + (", re-embedded" if report.reembedded else "")
        )
        return
    if as_json:
        emit_json(
            envelope(
                records=report.records,
                written=report.written,
                reembedded=report.reembedded,
                warnings=report.warnings,
            )
        )
        return
    _print_warnings(report.warnings)
    written = ", ".join(f"{n} {kind}" for kind, n in sorted(report.written.items()) if n)
    click.echo(
        f"imported {report.records} records ({written or 'nothing new'})"
        + (", re-embedded" if report.reembedded else "")
    )


def register(cli: click.Group) -> None:
    """Add the document commands to the ``memoir`` group."""
    for command in (
        add_command,
        rm_command,
        search_command,
        query_command,
        context_command,
        compact_command,
        export_command,
        import_command,
    ):
        cli.add_command(command)


# Kept for scripts that want the code an error maps to.
exit_code = exit_code_for
