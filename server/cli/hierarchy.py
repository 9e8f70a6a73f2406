"""``memoir ingest``, ``memoir ask``, ``memoir categories``, ``memoir runs``: the category hierarchy.

Each command opens the store (``--db`` takes sqlite, postgresql:// and mysql:// URLs), calls
``Memoir.hierarchy`` and prints a human view, or the JSON envelope with ``--json``. A result with
``status="error"`` exits non-zero with its hint, like any other error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memory_core.errors import InvalidInputError, MemoirError
from memory_core.scope import resolve_scope
from server.cli.inputs import read_stdin_text
from server.cli.main import CliState, pass_state
from server.cli.output import emit_json, envelope, fail, print_table
from server.cli.progress import progress_reporter

if TYPE_CHECKING:
    from memory_core.service import Memoir

__all__ = ["register"]

_STRATEGIES = ("one_shot", "wide_branch", "zoom_in", "branch_out")


def _scope(state: CliState, explicit: str | None) -> str:
    return resolve_scope(explicit, workspace=state.settings.server.workspace, cwd=Path.cwd())


def _finish(result: Any, as_json: bool, body: dict[str, Any]) -> None:
    """Print the result; a failed result exits with its error and hint."""
    if result.status == "error" and result.error is not None:
        if as_json:
            emit_json(envelope(False, **body))
        else:
            click.echo(f"error: {result.error.message}", err=True)
            if result.error.hint:
                click.echo(f"hint: {result.error.hint}", err=True)
        sys.exit(3 if result.error.code in ("empty_hierarchy", "no_chunks") else 1)
    if as_json:
        emit_json(envelope(**body))


def _tree_lines(nodes: list[dict[str, Any]], prefix: str = "") -> list[str]:
    lines: list[str] = []
    for index, node in enumerate(nodes):
        last = index == len(nodes) - 1
        count = f" ({node['chunk_count']} chunks)" if node.get("chunk_count") is not None else ""
        lines.append(f"{prefix}{'└── ' if last else '├── '}{node['name']}{count}")
        lines.extend(_tree_lines(node["children"], prefix + ("    " if last else "│   ")))
    return lines


def register(cli: click.Group) -> None:
    """Add the hierarchy commands to the ``memoir`` group."""

    @cli.command()
    @click.argument("source", required=False, metavar="FILE|-")
    @click.option("--text", "text", help="Ingest this text instead of a file.")
    @click.option(
        "--category",
        help='File it under this category path, broadest first: "Databases / Indexing" '
        "(existing names preferred; default: the offline classifier or the configured model).",
    )
    @click.option("--scope", help="Scope to write to (default: the project of the cwd).")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @pass_state
    def ingest(
        state: CliState,
        source: str | None,
        text: str | None,
        category: str | None,
        scope: str | None,
        as_json: bool,
    ) -> None:
        """Chunk text (a file, - for stdin, or --text) and file it into the category tree.

        Inputs over hierarchy.ingest_batch_bytes stream in batches, one transaction each: a
        progress bar on a terminal (JSON progress lines on stderr with --json), and an
        interrupted ingest of the same input resumes after its last stored batch.
        """
        if (source is None) == (text is None):
            fail(
                InvalidInputError(
                    "give exactly one of FILE, - (stdin) or --text",
                    hint="memoir ingest notes.md  |  cat notes.md | memoir ingest -  |  "
                    "memoir ingest --text '…'",
                ),
                as_json=as_json,
            )
        target = _scope(state, scope)
        body: str | None = text
        origin: str | None = None
        if source == "-":
            try:
                body, origin = read_stdin_text(state.settings.limits.stdin_bytes), "stdin"
            except MemoirError as error:
                fail(error, as_json=as_json)

        progress = progress_reporter(as_json=as_json)

        async def run(memoir: Memoir) -> Any:
            if body is not None:
                return await memoir.hierarchy.ingest_text(
                    body, scope=target, source=origin, category=category, progress=progress
                )
            assert source is not None  # exactly one of FILE, - or --text (checked above)
            return await memoir.hierarchy.ingest_file(
                source, scope=target, category=category, progress=progress
            )

        try:
            result = state.run(run, as_json=as_json)
        finally:
            if progress is not None:
                progress.close()
        _finish(result, as_json, {"ingest": result.model_dump(exclude_none=True)})
        if not as_json:
            new = sum(1 for c in result.chunks if not c.already_stored)
            click.echo(
                f"ingested {len(result.chunks)} chunks ({new} new, "
                f"{len(result.categories_created)} new categories) in "
                f"{result.total_latency:.2f} s with {', '.join(_models(result.model_used)) or '-'}"
            )
            for warning in result.warnings:
                click.echo(f"warning: {warning}", err=True)
            print_table(
                ["chunk", "tokens", "category"],
                [(c.chunk_id[:12], c.token_count, c.category_path) for c in result.chunks],
            )

    @cli.command()
    @click.argument("question")
    @click.option("--strategy", type=click.Choice(_STRATEGIES), help="Traversal strategy.")
    @click.option("--budget", type=int, help="max_token_budget for the chunks given to the LLM.")
    @click.option(
        "--summarize/--no-summarize",
        default=None,
        help="Summarise in parts when the candidates exceed the budget.",
    )
    @click.option("--scope", help="Scope to read (default: the project of the cwd).")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @pass_state
    def ask(
        state: CliState,
        question: str,
        strategy: str | None,
        budget: int | None,
        summarize: bool | None,
        scope: str | None,
        as_json: bool,
    ) -> None:
        """Answer QUESTION by walking the category tree; cites the chunks it used."""
        target = _scope(state, scope)

        async def run(memoir: Memoir) -> Any:
            return await memoir.hierarchy.query(
                question,
                scope=target,
                strategy=strategy,
                max_token_budget=budget,
                summarize=summarize,
            )

        result = state.run(run, as_json=as_json)
        _finish(result, as_json, {"query": result.model_dump()})
        if not as_json:
            click.echo(result.answer or "")
            click.echo("")
            click.echo(
                f"strategy {result.strategy}, {len(result.used_chunks)} chunks "
                f"({result.candidate_tokens} tokens, budget {result.max_token_budget})"
                + (f", summarised in {result.parts} parts" if result.summarized else "")
                + f", {result.total_latency:.2f} s, model {', '.join(_models(result.model_used))}"
            )
            for citation in result.citations:
                origin = f" ({citation.source})" if citation.source else ""
                click.echo(f"  [{citation.chunk_id[:12]}] {citation.category_path}{origin}")
            if result.dropped_paths:
                click.echo(f"dropped for the budget: {'; '.join(result.dropped_paths)}")
            for warning in result.warnings:
                click.echo(f"warning: {warning}", err=True)

    @cli.command()
    @click.option("--tree", is_flag=True, help="Show the tree (default: a table).")
    @click.option(
        "--recluster",
        is_flag=True,
        help="First rebuild the tree from the content (clusters of the chunks, named from "
        "their words), replacing names chosen by agents or models.",
    )
    @click.option("--scope", help="Scope to read (default: the project of the cwd).")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output (nested).")
    @pass_state
    def categories(
        state: CliState, tree: bool, recluster: bool, scope: str | None, as_json: bool
    ) -> None:
        """List the category hierarchy (nested nodes with name, level and children)."""
        target = _scope(state, scope)

        async def run(memoir: Memoir) -> Any:
            if recluster:
                return await memoir.hierarchy.recluster(scope=target)
            return await memoir.hierarchy.categories(scope=target)

        result = state.run(run, as_json=as_json)
        data = result.model_dump()
        if as_json:
            emit_json(envelope(categories=data))
            return
        click.echo(
            f"{result.total} categories (cap {result.max_categories}), depth {result.depth}, "
            f"scope {result.scope}"
        )
        if tree:
            for line in _tree_lines(data["nodes"]):
                click.echo(line)
            return
        rows: list[tuple[Any, ...]] = []

        def walk(nodes: list[dict[str, Any]], path: str) -> None:
            for node in nodes:
                label = f"{path} / {node['name']}" if path else node["name"]
                rows.append((node["category_id"], node["level"], node["chunk_count"] or "", label))
                walk(node["children"], label)

        walk(data["nodes"], "")
        print_table(["id", "level", "chunks", "path"], rows)

    @cli.command()
    @click.option("--limit", type=int, default=20, show_default=True)
    @click.option(
        "--kind",
        type=click.Choice(["hierarchy_query", "hierarchy_ingest", "hierarchy_tree"]),
        default=None,
        help="Only this kind of run.",
    )
    @click.option("--scope", help="Scope to read (default: the project of the cwd).")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @pass_state
    def runs(
        state: CliState, limit: int, kind: str | None, scope: str | None, as_json: bool
    ) -> None:
        """Recorded query and ingest runs: strategy, paths, budget, tokens, latency."""
        target = _scope(state, scope)

        async def run(memoir: Memoir) -> Any:
            return await memoir.hierarchy.runs(scope=target, limit=limit, kind=kind)

        records = state.run(run, as_json=as_json)
        if as_json:
            emit_json(envelope(runs=records))
            return
        print_table(
            ["run", "kind", "started", "ms", "strategy", "tokens/budget", "dropped", "status"],
            [
                (
                    r["run_id"],
                    r["kind"],
                    r["started_at"][:19],
                    round(r["took_ms"] or 0, 1),
                    r["payload"].get("strategy", ""),
                    f"{r['payload'].get('candidate_tokens', '')}/{r['payload'].get('budget', '')}"
                    if r["kind"] == "hierarchy_query"
                    else "",
                    len(r["payload"].get("dropped_paths", []) or []),
                    r["payload"].get("status", ""),
                )
                for r in records
            ],
        )


def _models(used: dict[str, list[str]]) -> list[str]:
    return list(dict.fromkeys(name for names in used.values() for name in names))
