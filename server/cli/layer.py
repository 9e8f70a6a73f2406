"""``memoir memorize | retrieve | evolve`` and ``memoir pipeline …``: the memory layer
(seed 004) described by a layer file (``--layer``, default ``./memoir-layer.toml``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from memory_core.errors import InvalidInputError, MemoirError
from server.cli.output import emit_json, envelope, fail, print_table
from server.principals import local_principal

__all__ = ["register"]

T = TypeVar("T")

_layer_option = click.option(
    "--layer",
    "layer_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("memoir-layer.toml"),
    show_default=True,
    help="The memory layer file (scope fields, taxonomy, store).",
)
_principal_option = click.option(
    "--principal",
    "principal",
    metavar="NAME",
    default=None,
    help="Who is asking, for the layer's authorise hook (default: local:<OS user>).",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
_scope_option = click.option(
    "--scope", "scope", multiple=True, metavar="FIELD=VALUE", help="One per scope field."
)


def _with_service(layer_path: Path, as_json: bool, fn: Callable[[Any], T]) -> T:
    from memory_core.pipeline.layer_file import open_layer_file
    from server.cli.main import CliState

    # memoir.toml's [llm]: the layer file's profiles may reuse its profiles by name
    state = click.get_current_context().find_object(CliState)
    try:
        service = open_layer_file(layer_path, None if state is None else state.settings.llm)
        try:
            return fn(service)
        finally:
            service.close()
    except MemoirError as error:
        fail(error, as_json=as_json)


def _config_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def register(cli: click.Group) -> None:
    """Add the memory-layer commands to the ``memoir`` group."""

    @cli.command()
    @_layer_option
    @_scope_option
    @click.option("--text", help="Content to memorize.")
    @click.option("--file", "file", help="A file (path or file:// URI) to memorize.")
    @click.option(
        "--conversation",
        "conversation",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help='A JSON file: [{"role": "user", "content": "..."}, ...].',
    )
    @_principal_option
    @_json_option
    def memorize(
        layer_path: Path,
        scope: tuple[str, ...],
        text: str | None,
        file: str | None,
        conversation: Path | None,
        principal: str | None,
        as_json: bool,
    ) -> None:
        """Memorize a conversation, a text or a file into one scope."""
        from memory_core.pipeline.layer_file import parse_scope_pairs

        def run(service: Any) -> None:
            messages = None
            if conversation is not None:
                try:
                    messages = json.loads(conversation.read_text(encoding="utf-8"))
                except json.JSONDecodeError as exc:
                    raise InvalidInputError(
                        f"{conversation} is not JSON: {exc}",
                        hint='write [{"role": "user", "content": "..."}]',
                    ) from exc
            result = service.memorize(
                parse_scope_pairs(scope),
                conversation=messages,
                content=text,
                uri=file,
                principal=local_principal("cli", principal),
            )
            if as_json:
                emit_json(envelope(True, **result.model_dump()))
                return
            state = "already memorized" if result.duplicate else "memorized"
            click.echo(f"{state}: resource {result.resource_id}")
            click.echo(
                f"items added {len(result.items_added)}, merged {len(result.items_merged)}; "
                f"categories {', '.join(result.categories) or '-'}"
            )
            for missing in result.missing_capabilities:
                click.echo(f"missing capability {missing['capability']}: {missing['hint']}")

        _with_service(layer_path, as_json, run)

    @cli.command()
    @_layer_option
    @click.option(
        "--scope",
        "scope",
        multiple=True,
        metavar="FIELD=VALUE",
        help="One per scope field: VALUE, A,B (IN) or * (ANY, not on boundary fields).",
    )
    @click.argument("query")
    @click.option("--top-k", type=int, default=None)
    @click.option("--budget", "budget", type=int, default=None, help="Context token budget.")
    @_principal_option
    @_json_option
    def retrieve(
        layer_path: Path,
        scope: tuple[str, ...],
        query: str,
        top_k: int | None,
        budget: int | None,
        principal: str | None,
        as_json: bool,
    ) -> None:
        """Retrieve context for QUERY across the selected scopes."""
        from memory_core.pipeline.layer_file import parse_selector_pairs

        def run(service: Any) -> None:
            result = service.retrieve(
                parse_selector_pairs(scope),
                query,
                top_k=top_k,
                budget_tokens=budget,
                principal=local_principal("cli", principal),
            )
            if as_json:
                emit_json(envelope(True, **result.model_dump()))
                return
            click.echo(result.context or "(nothing found)")
            if result.fallbacks:
                click.echo("fallbacks: " + "; ".join(result.fallbacks), err=True)

        _with_service(layer_path, as_json, run)

    @cli.command()
    @_layer_option
    @_scope_option
    @_principal_option
    @_json_option
    def evolve(
        layer_path: Path, scope: tuple[str, ...], principal: str | None, as_json: bool
    ) -> None:
        """Dedupe, re-cluster and adjust the intention of one scope; print the diff."""
        from memory_core.pipeline.layer_file import parse_scope_pairs

        def run(service: Any) -> None:
            result = service.evolve(
                parse_scope_pairs(scope), principal=local_principal("cli", principal)
            )
            if as_json:
                emit_json(envelope(True, **result.model_dump()))
            else:
                click.echo(json.dumps(result.diff, indent=2))

        _with_service(layer_path, as_json, run)

    @cli.group()
    def pipeline() -> None:
        """Show and edit the memory layer's pipelines (every change is a revision)."""

    @pipeline.command("show")
    @_layer_option
    @click.argument("name", required=False, type=click.Choice(["memorize", "retrieve", "evolve"]))
    @_json_option
    def show(layer_path: Path, name: str | None, as_json: bool) -> None:
        """The steps of every pipeline (or of NAME)."""

        def run(service: Any) -> None:
            data = service.pipelines()
            chosen = {name: data[name]} if name else data
            if as_json:
                emit_json(envelope(True, revision=service.pipeline_revision, pipelines=chosen))
                return
            click.echo(f"pipeline revision {service.pipeline_revision}")
            for pipeline_name, steps in chosen.items():
                click.echo(f"\n{pipeline_name}:")
                print_table(
                    ["step_id", "impl", "role", "enabled", "config"],
                    [[s["step_id"], s["impl"], s["role"], s["enabled"], json.dumps(s["config"])]
                     for s in steps],
                )  # fmt: skip

        _with_service(layer_path, as_json, run)

    @pipeline.command("config")
    @_layer_option
    @click.argument("step_id")
    @click.argument("settings", nargs=-1, required=True, metavar="KEY=VALUE...")
    @_json_option
    def config(layer_path: Path, step_id: str, settings: tuple[str, ...], as_json: bool) -> None:
        """Override STEP_ID's config (values are JSON when they parse, else strings)."""

        def run(service: Any) -> None:
            changes = {}
            for pair in settings:
                key, sep, value = pair.partition("=")
                if not sep:
                    raise InvalidInputError(
                        f"setting {pair!r} is not KEY=VALUE", hint="e.g. top_k=20"
                    )
                changes[key] = _config_value(value)
            revision = service.config(step_id, **changes)
            if as_json:
                emit_json(envelope(True, revision=revision))
            else:
                click.echo(f"revision {revision}")

        _with_service(layer_path, as_json, run)

    @pipeline.command("revisions")
    @_layer_option
    @_json_option
    def revisions(layer_path: Path, as_json: bool) -> None:
        """Every pipeline revision."""

        def run(service: Any) -> None:
            rows = service.revisions()
            if as_json:
                emit_json(envelope(True, revisions=rows, current=service.pipeline_revision))
                return
            print_table(["revision", "change"], [[r["revision"], r["change"]] for r in rows])

        _with_service(layer_path, as_json, run)

    @pipeline.command("diff")
    @_layer_option
    @click.argument("old", type=int)
    @click.argument("new", type=int, required=False)
    @_json_option
    def diff(layer_path: Path, old: int, new: int | None, as_json: bool) -> None:
        """What changed from revision OLD to NEW (default: the current one)."""

        def run(service: Any) -> None:
            changes = service.diff(old, new)
            if as_json:
                emit_json(envelope(True, diff=changes))
            else:
                click.echo(json.dumps(changes, indent=2) if changes else "(no changes)")

        _with_service(layer_path, as_json, run)

    @pipeline.command("rollback")
    @_layer_option
    @click.argument("revision", type=int)
    @_json_option
    def rollback(layer_path: Path, revision: int, as_json: bool) -> None:
        """Restore REVISION's pipelines as a new revision."""

        def run(service: Any) -> None:
            new = service.rollback(revision)
            if as_json:
                emit_json(envelope(True, revision=new))
            else:
                click.echo(f"revision {new} (= revision {revision})")

        _with_service(layer_path, as_json, run)

    @pipeline.command("resume")
    @_layer_option
    @click.argument("kind", type=click.Choice(["memorize", "retrieve", "evolve"]))
    @click.argument("run_id")
    @_json_option
    def resume(layer_path: Path, kind: str, run_id: str, as_json: bool) -> None:
        """Finish the KIND run RUN_ID (its runner_run_id: a Burr app id or a Temporal workflow
        id) whose process stopped, on its own pipeline revision, and log it. Idempotent: a run
        already logged as finished prints that entry."""

        def run(service: Any) -> None:
            entry = service.resume(kind, run_id)
            if as_json:
                emit_json(envelope(True, run=entry))
                return
            steps = ", ".join(s["step_id"] for s in entry["steps"]) or "-"
            click.echo(
                f"{kind} run {run_id}: {entry['status']} on revision "
                f"{entry['pipeline_revision']} (run log {entry['run_id']})"
            )
            click.echo(f"steps run: {steps}")

        _with_service(layer_path, as_json, run)

    def _step_from_json(raw: str) -> Any:
        from memory_core.pipeline.editing import step

        try:
            data = json.loads(raw)
            return step(
                data["step_id"],
                data["impl"],
                data.get("role", data["impl"]),
                data.get("requires", ()),
                data.get("produces", ()),
                data.get("capabilities", ()),
                **data.get("config", {}),
            )
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidInputError(
                f"--step is not a step spec: {exc}",
                hint='pass JSON like {"step_id": "rerank2", "impl": "verify_rerank", '
                '"role": "verify", "requires": ["candidates"], "produces": ["ranked"], '
                '"capabilities": ["llm"], "config": {"keep": 5}}',
            ) from exc

    @pipeline.command("insert")
    @_layer_option
    @click.option("--after", "after", metavar="STEP_ID", help="Insert after this step.")
    @click.option("--before", "before", metavar="STEP_ID", help="Insert before this step.")
    @click.option("--step", "step_json", required=True, help="The new step as JSON.")
    @_json_option
    def insert(
        layer_path: Path, after: str | None, before: str | None, step_json: str, as_json: bool
    ) -> None:
        """Insert a step (a built-in impl with its own id and config) before or after another."""

        def run(service: Any) -> None:
            if (after is None) == (before is None):
                raise InvalidInputError(
                    "pass exactly one of --after or --before", hint="e.g. --after recall_items"
                )
            spec = _step_from_json(step_json)
            new = (
                service.insert_after(after, spec)
                if after is not None
                else service.insert_before(before, spec)
            )
            if as_json:
                emit_json(envelope(True, revision=new))
            else:
                click.echo(f"revision {new}")

        _with_service(layer_path, as_json, run)

    @pipeline.command("replace")
    @_layer_option
    @click.argument("step_id")
    @click.option("--step", "step_json", required=True, help="The replacing step as JSON.")
    @_json_option
    def replace(layer_path: Path, step_id: str, step_json: str, as_json: bool) -> None:
        """Replace STEP_ID by another step (validated like every change)."""

        def run(service: Any) -> None:
            new = service.replace(step_id, _step_from_json(step_json))
            if as_json:
                emit_json(envelope(True, revision=new))
            else:
                click.echo(f"revision {new}")

        _with_service(layer_path, as_json, run)

    @pipeline.command("remove")
    @_layer_option
    @click.argument("step_id")
    @click.option("--disable", is_flag=True, help="Keep the step but skip it.")
    @_json_option
    def remove(layer_path: Path, step_id: str, disable: bool, as_json: bool) -> None:
        """Remove (or disable) STEP_ID; refused when a later step needs what it produces."""

        def run(service: Any) -> None:
            new = service.disable(step_id) if disable else service.remove(step_id)
            if as_json:
                emit_json(envelope(True, revision=new))
            else:
                click.echo(f"revision {new}")

        _with_service(layer_path, as_json, run)
