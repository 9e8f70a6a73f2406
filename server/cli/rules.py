"""``memoir rules …``: ingest rule documents, detect a task's context, query directives.

Thin: every command parses options, calls :class:`memory_core.rules.service.RulesService`
through the facade, and prints a table / markdown or the JSON envelope. ``detect`` and
``query`` also take ``--stdin``: one task per line in, one JSON result per line out.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memory_core.errors import MemoirError
from memory_core.scope import resolve_scope
from server.cli.main import CliState, pass_state
from server.cli.output import emit_json, envelope, print_table

if TYPE_CHECKING:
    from memory_core.service import Memoir

__all__ = ["register", "rules"]


def _scope(state: CliState, explicit: str | None) -> str:
    return resolve_scope(explicit, workspace=state.settings.server.workspace, cwd=Path.cwd())


def _tasks(task: str | None, use_stdin: bool) -> list[str]:
    if use_stdin:
        return [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if task is None:
        raise click.UsageError("give a TASK argument or --stdin")
    return [task]


def _jsonl(payload: dict[str, Any]) -> None:
    click.echo(json.dumps(payload, ensure_ascii=False, default=str))


@click.group()
def rules() -> None:
    """Rule documents as a knowledge graph: upsert, detect, query, list, show, rm, runs."""


_scope_option = click.option(
    "--scope", default=None, help="Scope (default: the project of the working directory)."
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@rules.command("upsert")
@click.argument("paths", nargs=-1, required=True)
@click.option("--overwrite", is_flag=True, help="Replace rules of the same name (else merge).")
@click.option(
    "--allow-root",
    "allowed_roots",
    multiple=True,
    help="Folder paths may resolve into (default: rules.allowed_roots and the project root).",
)
@click.option(
    "--include",
    "include",
    multiple=True,
    metavar="GLOB",
    help="In folders, also take files matching GLOB (e.g. 'docs/**/*.md'); repeatable.",
)
@click.option(
    "--exclude",
    "exclude",
    multiple=True,
    metavar="GLOB",
    help="In folders, leave out files matching GLOB (e.g. 'docs/archive/**'); repeatable.",
)
@_scope_option
@_json_option
@pass_state
def upsert(
    state: CliState,
    paths: tuple[str, ...],
    overwrite: bool,
    allowed_roots: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    scope: str | None,
    as_json: bool,
) -> None:
    """Ingest rule files or folders.

    A folder is walked for every rule file a team has: AGENTS.md / CLAUDE.md / GEMINI.md at
    any depth, .cursor/rules, .claude/rules, .windsurf/rules, .clinerules, .roo/rules*,
    Copilot instructions, markdown with rule front matter or in a rules folder, and the files
    AGENTS.md / CLAUDE.md import. Every markdown file left out is listed with the reason.
    Paths you name here are yours to read (no allowed-roots check).
    """
    target = _scope(state, scope)

    async def run(memoir: Memoir) -> Any:
        return await memoir.rules.upsert_markdown(
            list(paths),
            scope=target,
            overwrite=overwrite,
            allowed_roots=allowed_roots or None,
            include=include,
            exclude=exclude,
            named_by_user=True,
        )

    report = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(report.documents_failed == 0, scope=target, **report.model_dump()))
    else:
        print_table(
            ["document", "status", "rule", "directives"],
            [(d.path, d.status, d.rule_id or "-", d.directives) for d in report.documents],
        )
        click.echo(
            f"rules {report.rules_upserted} · sections {report.sections_created} · directives "
            f"+{report.directives_added} -{report.directives_removed} "
            f"={report.directives_unchanged} · patterns {report.patterns_extracted} · "
            f"relations {report.relations_established} · {report.took_ms:.0f} ms"
        )
        for warning in report.warnings:
            click.echo(f"warning: {warning}", err=True)
    if report.documents_failed:
        sys.exit(1)


@rules.command("detect")
@click.argument("task", required=False)
@click.option("--keywords", is_flag=True, help="Also return action words and domain terms.")
@click.option("--stdin", "use_stdin", is_flag=True, help="One task per line; JSON lines out.")
@_scope_option
@_json_option
@pass_state
def detect(
    state: CliState,
    task: str | None,
    keywords: bool,
    use_stdin: bool,
    scope: str | None,
    as_json: bool,
) -> None:
    """Detect the layer, topics and technologies of TASK."""
    tasks = _tasks(task, use_stdin)
    target = _scope(state, scope)

    async def run(memoir: Memoir) -> list[Any]:
        out: list[Any] = []
        for text in tasks:
            try:
                out.append(
                    await memoir.rules.detect_context(text, scope=target, return_keywords=keywords)
                )
            except MemoirError as error:
                if not use_stdin:
                    raise
                out.append(error)
        return out

    results = state.run(run, as_json=as_json or use_stdin)
    if use_stdin:
        for result in results:
            if isinstance(result, MemoirError):
                _jsonl(envelope(False, error=result.to_dict()))
            else:
                _jsonl(envelope(context=result.model_dump()))
        return
    result = results[0]
    if as_json:
        emit_json(envelope(context=result.model_dump()))
        return
    click.echo(f"layer       {result.detected_layer or '-'}")
    for candidate in result.layer_candidates[1:4]:
        click.echo(f"            {candidate.layer} ({candidate.confidence:.2f})")
    click.echo(f"topics      {', '.join(result.topics) or '-'}")
    click.echo(f"languages   {', '.join(result.languages) or '-'}")
    click.echo(f"frameworks  {', '.join(result.frameworks) or '-'}")
    click.echo(f"platforms   {', '.join(result.platforms) or '-'}")
    if result.keywords is not None:
        click.echo(f"keywords    {', '.join(result.keywords) or '-'}")
    click.echo(f"confidence  {result.confidence:.2f}")
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)


@rules.command("query")
@click.argument("task", required=False)
@click.option("--budget", type=int, default=None, help="Token budget (default 900).")
@click.option("--max-items", type=int, default=None, help="Most directives to return.")
@click.option("--strict-layer", is_flag=True, help="Only the detected layer (and '*').")
@click.option("--breadcrumbs", is_flag=True, help="Source path, lines and section per directive.")
@click.option("--mode", "mode_slug", default=None, help="Agent mode: architect, code, debug, test…")
@click.option("--explain", is_flag=True, help="Print each directive's score breakdown.")
@click.option("--stdin", "use_stdin", is_flag=True, help="One task per line; JSON lines out.")
@_scope_option
@_json_option
@pass_state
def query(
    state: CliState,
    task: str | None,
    budget: int | None,
    max_items: int | None,
    strict_layer: bool,
    breadcrumbs: bool,
    mode_slug: str | None,
    explain: bool,
    use_stdin: bool,
    scope: str | None,
    as_json: bool,
) -> None:
    """The directives that matter for TASK, ranked, within a token budget."""
    tasks = _tasks(task, use_stdin)
    target = _scope(state, scope)

    async def run(memoir: Memoir) -> list[Any]:
        # A one-shot command can wait for the model; a server never does.
        # On failure the query itself reports "semantic ranking unavailable".
        with contextlib.suppress(MemoirError):
            await memoir.embedder.ensure_loaded()
        out: list[Any] = []
        for text in tasks:
            try:
                out.append(
                    await memoir.rules.query_directives(
                        text,
                        scope=target,
                        token_budget=budget,
                        max_items=max_items,
                        strict_layer=strict_layer,
                        mode_slug=mode_slug,
                        include_breadcrumbs=breadcrumbs,
                    )
                )
            except MemoirError as error:
                if not use_stdin:
                    raise
                out.append(error)
        return out

    results = state.run(run, as_json=as_json or use_stdin)
    if use_stdin:
        for result in results:
            if isinstance(result, MemoirError):
                _jsonl(envelope(False, error=result.to_dict()))
            else:
                _jsonl(envelope(**result.model_dump()))
        return
    result = results[0]
    if as_json:
        emit_json(envelope(**result.model_dump()))
        return
    click.echo(result.context_block)
    stats = result.diagnostics.retrieval_stats
    click.echo(
        f"-- {stats.selected} of {stats.considered} candidates ({stats.searched} directives), "
        f"{result.diagnostics.tokens_used}/{result.diagnostics.token_budget} tokens, "
        f"{result.diagnostics.execution_ms:.1f} ms, left out: {stats.below_relevance} not "
        f"relevant enough, {stats.dropped_for_budget} over the budget",
        err=True,
    )
    if explain:
        for index, directive in enumerate(result.directives, start=1):
            click.echo(
                f"[{index}] {directive.score:.2f}  " + "; ".join(directive.breakdown.reasons),
                err=True,
            )
    for warning in result.diagnostics.warnings:
        click.echo(f"warning: {warning}", err=True)


@rules.command("list")
@_scope_option
@_json_option
@pass_state
def list_rules(state: CliState, scope: str | None, as_json: bool) -> None:
    """Every rule in the scope."""
    target = _scope(state, scope)

    async def run(memoir: Memoir) -> Any:
        return await memoir.rules.list_rules(scope=target)

    found = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(scope=target, rules=[r.model_dump() for r in found]))
        return
    print_table(
        ["rule", "layer", "directives", "authoritative for", "sources"],
        [
            (
                r.rule_id,
                r.layer or "-",
                r.directive_count,
                ", ".join(r.authoritative_for),
                ", ".join(r.sources),
            )
            for r in found
        ],
    )


@rules.command("show")
@click.argument("rule_id")
@_scope_option
@_json_option
@pass_state
def show(state: CliState, rule_id: str, scope: str | None, as_json: bool) -> None:
    """One rule with its directives."""
    target = _scope(state, scope)

    async def run(memoir: Memoir) -> Any:
        return await memoir.rules.get_rule(rule_id, scope=target)

    detail = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(rule=detail.model_dump()))
        return
    summary = detail.summary
    click.echo(f"# {summary.title or summary.name} ({summary.rule_id})")
    click.echo(f"layer: {summary.layer or '-'} · topics: {', '.join(summary.topics) or '-'}")
    click.echo(f"authoritative for: {', '.join(summary.authoritative_for) or '-'}")
    for condition in detail.when_to_apply:
        click.echo(f"  when: {condition}")
    for directive in detail.directives:
        click.echo(
            f"- [{directive.marker}] {directive.text}  "
            f"({directive.source_path}:{directive.line_start})"
        )


@rules.command("rm")
@click.argument("rule_id_or_path")
@_scope_option
@_json_option
@pass_state
def remove(state: CliState, rule_id_or_path: str, scope: str | None, as_json: bool) -> None:
    """Remove a rule (all its documents) or one document by its recorded path."""
    target = _scope(state, scope)

    async def run(memoir: Memoir) -> Any:
        return await memoir.rules.remove_rule(rule_id_or_path, scope=target)

    report = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(**report.model_dump()))
    else:
        click.echo(
            f"removed {', '.join(report.rule_ids)}: {report.documents_removed} document(s), "
            f"{report.directives_removed} directive(s)"
        )


@rules.command("runs")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@_scope_option
@_json_option
@pass_state
def runs(state: CliState, limit: int, scope: str | None, as_json: bool) -> None:
    """Recent query_directives runs: task, context, counts, tokens, latency."""
    target = _scope(state, scope)

    async def run(memoir: Memoir) -> Any:
        return await memoir.rules.list_query_runs(scope=target, limit=limit)

    found = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(scope=target, runs=[r.model_dump() for r in found]))
        return
    print_table(
        ["run", "started", "ms", "layer", "topics", "sel/cons/searched", "tokens", "task"],
        [
            (
                r.run_id,
                r.started_at[:19],
                round(r.took_ms or 0, 1),
                r.payload.get("detected_layer") or "-",
                ", ".join(r.payload.get("topics", [])[:3]),
                f"{r.payload.get('selected', '')}/{r.payload.get('considered', '')}/"
                f"{r.payload.get('searched', '')}",
                f"{r.payload.get('tokens_used', '')}/{r.payload.get('token_budget', '')}",
                str(r.payload.get("task", ""))[:40],
            )
            for r in found
        ],
    )


def register(cli: click.Group) -> None:
    """Add the ``rules`` group to the ``memoir`` CLI."""
    cli.add_command(rules)
