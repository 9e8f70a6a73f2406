"""``memoir memory …``: the agent's own memories from the shell. Thin over ``memoir.memories``
(:class:`memory_core.memories.service.MemoryService`).

The space is ``--space``, else the project of the working directory (its git root); the user
is ``--user``, else ``memories.default_user``. Human output by default, ``--json`` for the
response models as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memory_core.errors import InvalidInputError
from server.cli.main import CliState, pass_state
from server.cli.output import emit_json, envelope, fail, print_table

if TYPE_CHECKING:
    from memory_core.service import Memoir

__all__ = ["register"]

_SNIPPET = 70


def _space(state: CliState, explicit: str | None) -> str:
    from memory_core.scope import resolve_scope

    return resolve_scope(explicit, workspace=state.settings.server.workspace, cwd=Path.cwd())


def _where(fn: Any) -> Any:
    fn = click.option("--user", default=None, help="Owning user (default: memories.default_user).")(
        fn
    )
    return click.option(
        "--space", default=None, metavar="S",
        help="Space (default: the project of the working directory).",
    )(fn)  # fmt: skip


def _json_option(fn: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")(fn)


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET else flat[: _SNIPPET - 1] + "…"


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json")


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def _print_memory(view: Any) -> None:
    rows = [
        ("id", view.id),
        ("text", view.text),
        ("summary", view.summary or "-"),
        ("space / user", f"{view.space} / {view.user}"),
        ("role", view.role),
        ("tags", ", ".join(view.tags) or "-"),
        ("source ids", ", ".join(view.source_ids) or "-"),
        ("created", view.created_at),
        ("importance", f"{view.importance:.3f} ({view.category})"),
        ("pinned / saved", f"{view.pinned} / {view.manually_saved}"),
        ("repeats", view.repeat_count),
        ("needs embedding", view.needs_embedding),
        ("last scores", json.dumps(view.last_scores) if view.last_scores else "-"),
        ("valid", f"{view.valid_from or '-'} .. {view.valid_to or 'now'}"),
    ]
    if view.superseded_by:
        rows.append(("superseded by", view.superseded_by))
    if view.supersedes:
        rows.append(("supersedes", ", ".join(view.supersedes)))
    if view.anchor:
        a = view.anchor
        rows.append(("anchor", f"{a.path}:{a.start_line}-{a.end_line} ({a.status})"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key.ljust(width)}  {value}")


@click.group("memory")
def memory_group() -> None:
    """The agent's own memories: remember, recall, pin, forget, incognito (seeds/001)."""


@memory_group.command("add")
@click.argument("text")
@_where
@click.option("--role", type=click.Choice(["user", "assistant", "system"]), default="user")
@click.option("--tag", "tags", multiple=True, help="Tag (repeatable).")
@click.option("--source-id", "source_ids", multiple=True, help="Provenance reference (repeatable).")
@click.option("--created-at", default=None, metavar="ISO", help="When it was said.")
@click.option("--saved", is_flag=True, help="The user explicitly asked to save it.")
@click.option("--pin", is_flag=True, help="Pin it (never trimmed).")
@click.option("--session", default=None, help="Session id (incognito sessions save nothing).")
@_json_option
@pass_state
def add_command(
    state: CliState, text: str, space: str | None, user: str | None, role: str,
    tags: tuple[str, ...], source_ids: tuple[str, ...], created_at: str | None, saved: bool,
    pin: bool, session: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Remember TEXT (merged into a near-duplicate if there is one)."""
    target = _space(state, space)

    async def run(memoir: Memoir) -> Any:
        await memoir.embedder.ensure_loaded()
        return await memoir.memories.remember(
            text, space=target, user=user, role=role, tags=tags, source_ids=source_ids,
            created_at=created_at, manually_saved=saved, pin=pin, session=session,
        )  # fmt: skip

    result = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(**_dump(result)))
        return
    _warn(result.warnings)
    if result.memory is not None:
        click.echo(f"{result.status} {result.memory.id}: {_snippet(result.memory.text)}")
    else:
        click.echo(f"{result.status}: {result.reason}")
    for old in result.superseded:
        click.echo(f"supersedes {old}")
    if result.trimmed:
        click.echo(f"trimmed {len(result.trimmed)} low-scoring memories (soft cap)")


@memory_group.command("import")
@click.argument("file", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "official", "claude-code"]), default="jsonl",
    help="jsonl (memoir), official (memory.jsonl of the reference server), claude-code (folder).",
)  # fmt: skip
@_where
@_json_option
@pass_state
def import_command(
    state: CliState, file: Path, fmt: str, space: str | None, user: str | None, as_json: bool
) -> None:
    """Import memories from FILE (a folder for --format claude-code)."""
    target = space if space is not None or fmt == "jsonl" else _space(state, None)

    async def run(memoir: Memoir) -> Any:
        await memoir.embedder.ensure_loaded()
        return await memoir.memories.import_(file, format=fmt, space=target, user=user)

    report = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(**_dump(report)))
        return
    _warn(report.warnings)
    click.echo(
        f"imported {report.imported}, merged {report.merged}, skipped {report.skipped}"
        + (
            f", {report.entities} entities, {report.relations} relations"
            if fmt == "official"
            else ""
        )
    )
    for issue in report.errors[:20]:
        click.echo(f"line {issue.line}: {issue.error}", err=True)


def _recall_line(result: Any) -> dict[str, Any]:
    return {
        "query": result.query,
        "status": result.status,
        "results": [
            {
                "id": h.id, "text": h.text, "tags": h.tags, "source_ids": h.source_ids,
                "created_at": h.created_at, "scores": h.scores.model_dump(),
            }
            for h in result.results
        ],
        "context": result.context,
        "used_tokens": result.used_tokens,
        "warnings": result.warnings,
    }  # fmt: skip


@memory_group.command("recall")
@click.argument("query", required=False)
@_where
@click.option("--k", "k", type=int, default=None, help="Entries at most (default 12).")
@click.option("--now", default=None, metavar="ISO", help="Rank as of this time (reproducible).")
@click.option("--budget-tokens", type=int, default=None, help="Token budget of the context.")
@click.option("--stdin", "from_stdin", is_flag=True, help="One query per stdin line; JSONL out.")
@click.option("--session", default=None)
@click.option("--explain", is_flag=True, help="Include each arm's candidates.")
@_json_option
@pass_state
def recall_command(
    state: CliState, query: str | None, space: str | None, user: str | None, k: int | None,
    now: str | None, budget_tokens: int | None, from_stdin: bool, session: str | None,
    explain: bool, as_json: bool,
) -> None:  # fmt: skip
    """What is remembered about QUERY, ranked by relevance, recency and importance."""
    if (query is None) == (not from_stdin):
        fail(
            InvalidInputError(
                "give a QUERY or --stdin (not both)",
                hint="memoir memory recall 'deploys'  or  … --stdin < queries.txt",
            ),
            as_json=as_json,
        )
    target = _space(state, space)
    queries = [query] if query is not None else [q.strip() for q in sys.stdin if q.strip()]

    async def run(memoir: Memoir) -> list[Any]:
        await memoir.embedder.ensure_loaded()
        return [
            await memoir.memories.recall(
                q,
                space=target,
                user=user,
                k=k,
                budget_tokens=budget_tokens,
                now=now,
                session=session,
                explain=explain,
            )
            for q in queries
        ]

    results = state.run(run, as_json=as_json)
    if from_stdin:
        for result in results:
            click.echo(json.dumps(_recall_line(result), ensure_ascii=False))
        return
    result = results[0]
    if as_json:
        emit_json(envelope(**_dump(result)))
        return
    _warn(result.warnings)
    if not result.results:
        click.echo(
            f"nothing remembered about {query!r}" if result.status == "ok" else result.status
        )
        return
    print_table(
        ["id", "text", "rel", "rec", "imp", "total"],
        [
            (h.id[:12], _snippet(h.text), f"{h.scores.relevance:.2f}", f"{h.scores.recency:.2f}",
             f"{h.scores.importance:.2f}", f"{h.scores.total:.2f}")
            for h in result.results
        ],
    )  # fmt: skip


@memory_group.command("list")
@_where
@click.option("--pinned/--not-pinned", default=None, help="Only pinned (or unpinned) entries.")
@click.option("--saved/--not-saved", default=None, help="Only manually saved (or not) entries.")
@click.option("--tag", default=None)
@click.option("--history", is_flag=True, help="Include superseded entries.")
@click.option("--limit", type=int, default=50)
@click.option("--offset", type=int, default=0)
@_json_option
@pass_state
def list_command(
    state: CliState, space: str | None, user: str | None, pinned: bool | None,
    saved: bool | None, tag: str | None, history: bool, limit: int, offset: int, as_json: bool,
) -> None:  # fmt: skip
    """List memories, newest first."""
    target = _space(state, space)

    async def run(memoir: Memoir) -> Any:
        return await memoir.memories.entries(
            space=target, user=user, pinned=pinned, manually_saved=saved, tag=tag,
            include_history=history, limit=limit, offset=offset,
        )  # fmt: skip

    page = state.run(run, as_json=as_json, check_embedder=False)
    if as_json:
        emit_json(envelope(**_dump(page)))
        return
    print_table(
        ["id", "created", "pin", "imp", "text"],
        [
            (m.id[:12], m.created_at[:16], "*" if m.pinned else "", f"{m.importance:.2f}",
             _snippet(m.text))
            for m in page.entries
        ],
    )  # fmt: skip
    click.echo(f"{len(page.entries)} of {page.total}")


def _id_command(name: str, help_text: str) -> Any:
    @memory_group.command(name, help=help_text)
    @click.argument("memory_id")
    @_where
    @_json_option
    @pass_state
    def command(
        state: CliState, memory_id: str, space: str | None, user: str | None, as_json: bool
    ) -> None:
        target = _space(state, space)

        async def run(memoir: Memoir) -> Any:
            method = getattr(memoir.memories, name)  # show | pin | unpin | forget
            return await method(memory_id, space=target, user=user)

        result = state.run(run, as_json=as_json, check_embedder=False)
        if as_json:
            emit_json(envelope(**_dump(result)))
        elif name == "forget":
            click.echo(
                f"forgot {result.id} (re-creation blocked until {result.tombstone_expires_at})"
            )
        elif name == "show":
            _print_memory(result)
        else:
            click.echo(f"{name}ned {result.id}: {_snippet(result.text)}")

    return command


_id_command("show", "Show one memory with every field.")
_id_command("pin", "Pin a memory (never trimmed).")
_id_command("unpin", "Unpin a memory.")
_id_command("forget", "Forget a memory (hard delete; blocked from re-creation for 24 h).")


def _on_off(value: str | None) -> bool | None:
    return None if value is None else value == "on"


@memory_group.command("settings")
@_where
@click.option("--memory", "memory_on", type=click.Choice(["on", "off"]), default=None,
              help="Turn memory on or off for the space.")  # fmt: skip
@click.option("--incognito-default", type=click.Choice(["on", "off"]), default=None)
@click.option("--soft-cap", type=int, default=None, help="Entries kept before trimming.")
@_json_option
@pass_state
def settings_command(
    state: CliState, space: str | None, user: str | None, memory_on: str | None,
    incognito_default: str | None, soft_cap: int | None, as_json: bool,
) -> None:  # fmt: skip
    """Show or change the space's settings (memory_enabled, incognito_default, soft cap)."""
    target = _space(state, space)
    changing = any(v is not None for v in (memory_on, incognito_default, soft_cap))

    async def run(memoir: Memoir) -> Any:
        if changing:
            return await memoir.memories.update_settings(
                space=target, user=user, memory_enabled=_on_off(memory_on),
                incognito_default=_on_off(incognito_default), soft_cap=soft_cap,
            )  # fmt: skip
        return await memoir.memories.settings(space=target, user=user)

    view = state.run(run, as_json=as_json, check_embedder=False)
    if as_json:
        emit_json(envelope(**_dump(view)))
        return
    click.echo(f"space             {view.space} ({view.user})")
    click.echo(f"memory            {'on' if view.memory_enabled else 'off'}")
    click.echo(f"incognito default {'on' if view.incognito_default else 'off'}")
    click.echo(f"incognito now     {'on' if view.incognito else 'off'}")
    click.echo(f"soft cap          {view.soft_cap}")


@memory_group.group("incognito")
def incognito_group() -> None:
    """Incognito sessions: nothing is saved or recalled until `end`."""


def _incognito(action: str) -> Any:
    @incognito_group.command(action, help=f"{action.capitalize()} incognito for a session.")
    @_where
    @click.option("--session", default=None, help="Session id (default: the space's default).")
    @_json_option
    @pass_state
    def command(
        state: CliState, space: str | None, user: str | None, session: str | None, as_json: bool
    ) -> None:
        target = _space(state, space)

        async def run(memoir: Memoir) -> Any:
            method = (
                memoir.memories.incognito_start
                if action == "start"
                else memoir.memories.incognito_end
            )
            return await method(space=target, user=user, session=session)

        view = state.run(run, as_json=as_json, check_embedder=False)
        if as_json:
            emit_json(envelope(**_dump(view)))
        else:
            click.echo(f"incognito {'on' if view.incognito else 'off'} for session {view.session}")

    return command


_incognito("start")
_incognito("end")


@memory_group.command("stats")
@_where
@_json_option
@pass_state
def stats_command(state: CliState, space: str | None, user: str | None, as_json: bool) -> None:
    """Telemetry: backlog, p95 time to embed, failures, dedupe saves, trims, hit rate, actions."""
    target = _space(state, space)

    async def run(memoir: Memoir) -> Any:
        return await memoir.memories.stats(space=target, user=user)

    stats = state.run(run, as_json=as_json, check_embedder=False)
    if as_json:
        emit_json(envelope(**_dump(stats)))
        return
    data = _dump(stats)
    for key in ("entries", "pinned", "manually_saved", "superseded", "soft_cap", "backlog",
                "backlog_oldest_age_s", "embed_p95_ms", "embed_failure_rate", "dedupe_saves",
                "trims", "trimmed_entries", "trim_blocked_alerts", "recalls", "recall_hit_rate",
                "used_rate"):  # fmt: skip
        click.echo(f"{key.ljust(22)} {data[key] if data[key] is not None else '-'}")
    if stats.user_actions:
        click.echo(
            "user actions           " + ", ".join(f"{k} {v}" for k, v in stats.user_actions.items())
        )
    for alert in stats.alerts:
        click.echo(f"ALERT: {alert}", err=True)


@memory_group.command("backfill")
@click.option("--space", default=None, metavar="S", help="One space (default: every space).")
@click.option("--user", default=None)
@click.option("--batch-size", type=int, default=None)
@click.option("--max-batches", type=int, default=None)
@click.option("--retention", is_flag=True, help="Also delete unpinned entries past retention.")
@click.option("--rollup", "rollup_days", type=float, default=None, metavar="DAYS",
              help="Also roll up entries older than DAYS (needs --space).")  # fmt: skip
@_json_option
@pass_state
def backfill_command(
    state: CliState, space: str | None, user: str | None, batch_size: int | None,
    max_batches: int | None, retention: bool, rollup_days: float | None, as_json: bool,
) -> None:  # fmt: skip
    """Run memory_embed_backfill: embed every queued memory (needs_embedding)."""
    if (retention or rollup_days is not None) and space is None:
        fail(
            InvalidInputError("--retention and --rollup work on one space", hint="add --space S"),
            as_json=as_json,
        )

    async def run(memoir: Memoir) -> Any:
        await memoir.embedder.ensure_loaded()
        report = await memoir.memories.backfill(
            space=space, user=user, batch_size=batch_size, max_batches=max_batches
        )
        if retention:
            assert space is not None  # refused above without --space
            report.retention_deleted = len(
                await memoir.memories.apply_retention(space=space, user=user)
            )
        if rollup_days is not None:
            assert space is not None
            rolled = await memoir.memories.rollup(
                space=space, user=user, older_than_days=rollup_days
            )
            report.rollups = len(rolled.rollups)
        return report

    report = state.run(run, as_json=as_json)
    if as_json:
        emit_json(envelope(**_dump(report)))
        return
    _warn(report.warnings)
    click.echo(
        f"embedded {report.embedded} in {report.batches} batches ({report.per_second}/s), "
        f"failed {report.failed}, {report.remaining} still queued"
    )


@memory_group.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--space", default=None, metavar="S", help="One space (default: every space).")
@click.option("--user", default=None)
@click.option("--no-vectors", is_flag=True, help="Leave embeddings out (re-embedded on import).")
@pass_state
def export_command(
    state: CliState, file: Path | None, space: str | None, user: str | None, no_vectors: bool
) -> None:
    """Export memories as JSONL (to FILE, else stdout) that `import` reads back losslessly."""

    async def run(memoir: Memoir) -> Any:
        out = file if file is not None else sys.stdout
        return await memoir.memories.export(
            out, space=space, user=user, with_vectors=not no_vectors
        )

    report = state.run(run, as_json=False, check_embedder=False)
    if file is not None:
        click.echo(f"exported {report.exported} memories to {file}", err=True)


def register(cli: click.Group) -> None:
    cli.add_command(memory_group)
