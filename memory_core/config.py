"""One typed settings object, built once at an entry point and passed down.

Precedence, highest first: explicit arguments > environment (``MEMOIR_…``) > ``memoir.toml`` >
defaults. Nested sections use a double underscore in the environment
(``MEMOIR_SEARCH__RRF_K=30``); the few top-level keys are plain (``MEMOIR_DATABASE_URL``).

Nothing else in memoir reads ``os.environ``: modules receive a :class:`Settings`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory_core.errors import ConfigError

__all__ = [
    "CONFIG_FILENAME",
    "DEFAULT_DB_FILENAME",
    "ENV_PREFIX",
    "DocumentSettings",
    "EmbeddingSettings",
    "HierarchySettings",
    "LLMSettings",
    "LimitSettings",
    "LoggingSettings",
    "MemorySettings",
    "RulesSettings",
    "SearchSettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "find_config_file",
    "load_settings",
]

ENV_PREFIX = "MEMOIR_"
CONFIG_FILENAME = "memoir.toml"
DEFAULT_DB_FILENAME = "memoir.db"


class _Section(BaseModel):
    # Unknown keys are an error: a typo in memoir.toml must not be silently ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class StorageSettings(_Section):
    busy_timeout_ms: int = Field(5000, ge=0, description="How long a writer waits for the lock.")
    write_retries: int = Field(5, ge=0, description="Retries of a write that found the DB locked.")
    secure_delete: bool = Field(
        True,
        description="Deleted text is overwritten, not left in free pages, the FTS index or the "
        "WAL (SQLite): rm / forget are verifiable.",
    )
    integrity_check_interval_s: float = Field(
        300.0, ge=0, description="Seconds between quick integrity checks (0: only on open)."
    )
    integrity_check_max_errors: int = Field(
        10, ge=1, le=1000, description="PRAGMA quick_check(N): stop after N problems."
    )
    run_retention_days: float | None = Field(
        30.0, ge=0, description="Query and ingest runs older than this are deleted (None: kept)."
    )
    run_log_text: Literal["redacted", "none"] = Field(
        "redacted",
        description="What runs keep of a task or question: its redacted start, or nothing.",
    )


class EmbeddingSettings(_Section):
    model: str = Field(
        "local", description="'local', 'hash[:dim]' or a pydantic-ai provider:model."
    )
    dimension: int | None = Field(None, ge=1, description="Needed only for provider models.")
    batch_size: int = Field(32, ge=1)


class LoggingSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "warning"
    format: Literal["console", "json"] = "console"
    library_debug: bool = Field(
        False,
        description="Also let libraries (aiosqlite, httpx, uvicorn, the MCP SDK) log at debug "
        "level; their lines are redacted and cut either way.",
    )


class LimitSettings(_Section):
    """Bounds on hostile or accidental input; each error names the setting to raise."""

    filter_depth: int = Field(
        64, ge=1, le=200, description="Deepest nesting of a FEL / RQL filter (parentheses, NOT)."
    )
    filter_terms: int = Field(256, ge=1, le=500, description="Most terms in one FEL / RQL filter.")
    path_chars: int = Field(4096, ge=16, description="Longest path accepted.")
    stdin_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="Most bytes read from stdin (`memoir ingest -`)."
    )
    request_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Largest MCP / REST request body over HTTP."
    )


class DocumentSettings(_Section):
    chunk_tokens: int = Field(200, ge=16)
    overlap_tokens: int = Field(32, ge=0)
    # Larger files are skipped with a warning: at ~20 chunks/s with the local model a 50 MB
    # file (~250k chunks) would embed for hours. Raise it deliberately for such corpora.
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1)


class SearchSettings(_Section):
    # Weighted (min-max per arm) measured best on the labelled set with both the local model
    # and the hashing embedder (bench/bench_search.py); RRF stays one setting away.
    fusion: Literal["rrf", "weighted"] = "weighted"
    rrf_k: int = Field(60, ge=1)
    bm25_weight: float = Field(0.5, ge=0)
    vector_weight: float = Field(0.5, ge=0)
    max_limit: int = Field(50, ge=1, le=10_000)
    default_k: int = Field(10, ge=1, le=10_000)
    # A long-lived process keeps each scope's vectors as a numpy matrix (sqlite-vec's brute
    # force is ~10x slower); small stores and one-shot CLI calls just use vec0.
    vector_cache: bool = True
    vector_cache_min_items: int = Field(20_000, ge=0)
    vector_cache_max_items: int = Field(1_000_000, ge=0)


class RulesSettings(_Section):
    token_budget: int = Field(900, ge=1)
    must_safety_cap: int = Field(2000, ge=1)
    max_items: int = Field(50, ge=1, description="Most directives per query (budget binds first).")
    allowed_roots: tuple[str, ...] = ()
    weights: dict[str, float] = Field(default_factory=dict)
    modes: dict[str, dict[str, float]] = Field(default_factory=dict)
    extra_topics: dict[str, list[str]] = Field(default_factory=dict)
    extra_technologies: dict[str, list[str]] = Field(default_factory=dict)
    extra_layer_keywords: dict[str, list[str]] = Field(
        default_factory=dict, description="Layer -> extra detection keywords."
    )
    # 60: the fused order (rules/rerank.py) lifts the directives a wider pool brings in
    # (dev set, leave one repository out; bench/rules_eval/RESULTS.md).
    candidate_k: int = Field(
        60, ge=1, le=4096, description="Candidates per retrieval arm (lexical, semantic)."
    )
    graph_limit: int = Field(
        150, ge=0, le=100_000, description="Most candidates graph expansion may add per query."
    )
    memory_vectors_max: int = Field(
        200_000,
        ge=0,
        description="Keep directive vectors in memory (exact KNN in numpy) up to this many "
        "directives per scope; above it the sqlite-vec index is searched instead.",
    )
    detection_cache_ttl_s: float = Field(
        300.0, ge=0, description="How long a detected context is reused (Requirement 10.4)."
    )
    max_task_chars: int = Field(8000, ge=1, description="Longest task description accepted.")
    embedder_wait_s: float = Field(
        5.0,
        ge=0,
        description="How long a query waits for the embedding model to finish loading before "
        "ranking without it (the first call of a session; 0 never waits).",
    )


class HierarchySettings(_Section):
    depth: int = Field(3, ge=1, le=100)
    max_categories: int = Field(128, ge=1)
    strategy: Literal["one_shot", "wide_branch", "zoom_in", "branch_out"] = "one_shot"
    min_chunk_chars: int = Field(1000, ge=1)
    max_chunk_chars: int = Field(2000, ge=1)
    max_token_budget: int = Field(4000, ge=1)
    allow_exceed_max_token_budget_and_summarize: bool = False
    # Chunking: split after these delimiters (paragraph breaks are always kept).
    chunk_delimiters: tuple[str, ...] = (".", "\n")
    # Strategy parameters (memoirAI Requirement 8).
    wide_branch_n: int = Field(3, ge=1)
    zoom_in_n: int = Field(6, ge=1)
    zoom_in_n2: int = Field(2, ge=0)
    branch_out_n: int = Field(6, ge=1)
    branch_out_n2: int = Field(2, ge=0)
    branch_out_max_per_level: int = Field(12, ge=1)
    # Summarise mode reads at most this many budgets of candidates (every read is bounded).
    max_summary_parts: int = Field(16, ge=1, le=1000)
    # Offline model: reuse the nearest existing category above this cosine similarity.
    offline_reuse_threshold: float = Field(0.35, ge=-1, le=1)
    # How the offline model files chunks: "clusters" (chunk embeddings clustered level by level,
    # named from their distinctive words, re-clustered as the store grows) or "names" (one
    # call per level matching the chunk against category names: memoir before issue 13).
    offline_classifier: Literal["clusters", "names"] = "clusters"
    # The clustering classifier re-clusters a scope on its own up to this many chunks (beyond,
    # `memoir categories --recluster` does it on request: it reads every chunk's vector).
    recluster_max_chunks: int = Field(20_000, ge=0)
    # Largest UTF-8 text one ingest takes (ingest_text / ingest_file / MCP ingest / `memoir
    # ingest`): larger ones are refused with this limit named, until inputs stream in batches.
    # 512 KiB is ~430 chunks: embedded and filed well within an MCP client's 60 s timeout on
    # two cores (1 MiB took 222 s and 1.8 GB on a busy two-core machine, mostly embedding).
    max_ingest_bytes: int = Field(512 * 1024, ge=1)
    # Inputs larger than this are read, embedded and stored in batches of about this size, one
    # transaction each (a kill loses at most one batch; a re-run resumes).
    ingest_batch_bytes: int = Field(256 * 1024, ge=1024)
    # An MCP ingest above this size runs as a background job: the call returns its id at once
    # and memoir://jobs/{id} reports progress and the result (clients time out after ~60 s).
    background_ingest_bytes: int = Field(64 * 1024, ge=1)


class LLMSettings(_Section):
    # 'offline' is the built-in deterministic model; any pydantic-ai 'provider:model' string works.
    model: str = "offline"
    use_mcp_sampling: bool = True
    temperature: float = Field(0.0, ge=0, le=2)
    timeout_s: float = Field(60.0, gt=0)
    retries: int = Field(3, ge=0, le=10)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Deterministic mode: temperature forced to 0 and the provider parameters recorded per run.
    deterministic: bool = True


class MemorySettings(_Section):
    """The agent's own memories (seeds/001, Theoria): write path, ranking, cap, privacy."""

    default_user: str = Field("default", min_length=1, max_length=200)
    soft_cap: int = Field(200, ge=1, description="Entries kept per user/space before trimming.")
    tau_days: float = Field(7.0, gt=0, description="Recency decay: exp(-age / tau).")
    alpha: float = Field(1.0, ge=0, description="Weight of relevance in the tri-score.")
    beta: float = Field(1.0, ge=0, description="Weight of recency in the tri-score.")
    gamma: float = Field(1.0, ge=0, description="Weight of importance in the tri-score.")
    rrf_k: int = Field(60, ge=1)
    score_normalisation: Literal["minmax", "none"] = Field(
        "minmax",
        description="Scale relevance, recency and importance to [0, 1] over the candidates "
        "before weighting (as Generative Agents do); 'none' weights the raw values.",
    )
    relevance_gate: float = Field(
        0.8,
        ge=0,
        le=1,
        description="Recency and importance count only for candidates whose relevance is at "
        "least this share of the best candidate's (0: the spec's plain sum).",
    )
    mmr_lambda: float = Field(0.85, ge=0, le=1, description="1: relevance only, 0: diversity.")
    top_n: int = Field(12, ge=1, le=50, description="Entries a recall returns (spec: 8-16).")
    candidates: int = Field(50, ge=1, le=1000, description="Candidates per retrieval arm.")
    budget_tokens: int = Field(600, ge=1, description="Token budget of a recall's context.")
    summary_tokens: int = Field(
        60, ge=8, description="Entries longer than this are shown by their summary."
    )
    dedupe_distance: int = Field(3, ge=0, le=3, description="SimHash Hamming distance.")
    repeat_boost: float = Field(0.05, ge=0, le=1, description="Importance added per repeat.")
    repeat_boost_cap: float = Field(0.3, ge=0, le=1)
    base_importance: float = Field(0.3, ge=0, le=1)
    scores_stale_hours: float = Field(24.0, gt=0)
    tombstone_hours: float = Field(24.0, ge=0)
    retention_days: float = Field(180.0, ge=0, description="0 keeps entries forever.")
    importance_model: str = Field(
        "offline", description="'offline' (local classifier) or a pydantic-ai provider:model."
    )
    conflict_detection: bool = True
    embed_on_write: bool = Field(
        True, description="Run the backfill for a new entry right after it is written."
    )
    backfill_batch: int = Field(32, ge=1, le=4096)
    backfill_retries: int = Field(3, ge=0, le=10)
    backfill_backoff_s: float = Field(0.5, ge=0)
    backlog_alert: int = Field(100, ge=0, description="Alert when more entries wait.")
    backlog_alert_age_s: float = Field(3600.0, ge=0)
    max_text_chars: int = Field(8000, ge=1)
    official_server_tools: bool = Field(
        False, description="Also serve the official memory server's nine graph tools."
    )


class TokenSettings(_Section):
    """One bearer token the HTTP server accepts, stored as its SHA-256 (``memoir token new``)."""

    name: str = Field(min_length=1, max_length=100, description="Who holds it (logged).")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="hex SHA-256 of the token.")
    workspaces: tuple[str, ...] = Field(
        (), description="Folders (projects) this token may use; empty: every server workspace."
    )
    expires: str | None = Field(None, description="RFC 3339 time after which it is refused.")


class OAuthSettings(_Section):
    """The MCP authorization profile: this server is an OAuth 2.0 protected resource."""

    issuer_url: str = Field(description="The authorization server that issues the tokens.")
    resource_url: str = Field(description="This server's public MCP URL (the token audience).")
    introspection_url: str = Field(description="RFC 7662 endpoint that validates a token.")
    client_id: str | None = Field(None, description="memoir's own client id at that endpoint.")
    client_secret: str | None = None
    required_scopes: tuple[str, ...] = ()
    # Which projects an OAuth principal (its `sub`, else its client id) may use.
    workspaces: dict[str, tuple[str, ...]] = Field(default_factory=dict)


class AuthSettings(_Section):
    tokens: tuple[TokenSettings, ...] = ()
    oauth: OAuthSettings | None = None


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    transport: Literal["stdio", "sse", "http"] = "stdio"
    workspace: str | None = None
    workspaces: tuple[str, ...] = Field(
        (), description="Project folders this server may read (besides `workspace`)."
    )
    rate_limit_per_minute: int = Field(600, ge=0)
    call_timeout_s: float = Field(30.0, gt=0)
    extra_tools: bool = False
    layer_file: str | None = Field(
        None,
        description="A memoir-layer.toml (relative: to the config file): with extra_tools, the "
        "memorize / retrieve tools use this memory layer.",
    )
    layer_scope: dict[str, str] = Field(
        default_factory=dict,
        description="Scope values the layer tools fix (every boundary field): clients cannot "
        "change them.",
    )
    allowed_hosts: tuple[str, ...] = Field(
        (), description="Host headers accepted besides the bound address ('name:*' any port)."
    )
    allowed_origins: tuple[str, ...] = Field(
        (), description="Browser origins accepted besides loopback ones ('http://name:*')."
    )
    allow_unauthenticated_network: bool = Field(
        False, description="Serve a non-loopback address without authentication (unsafe)."
    )
    auth: AuthSettings = AuthSettings()


class Settings(BaseModel):
    """Every setting memoir has. Build it with :func:`load_settings`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    database_url: str | None = None
    tokenizer: str = "tiktoken:o200k_base"
    config_file: str | None = Field(None, description="The memoir.toml these came from, if any.")

    storage: StorageSettings = StorageSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    logging: LoggingSettings = LoggingSettings()
    documents: DocumentSettings = DocumentSettings()
    search: SearchSettings = SearchSettings()
    rules: RulesSettings = RulesSettings()
    hierarchy: HierarchySettings = HierarchySettings()
    llm: LLMSettings = LLMSettings()
    server: ServerSettings = ServerSettings()
    memories: MemorySettings = MemorySettings()
    limits: LimitSettings = LimitSettings()


_SECTIONS = {
    name
    for name, field in Settings.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, _Section)
}


def find_config_file(start: Path) -> Path | None:
    """The nearest ``memoir.toml`` from ``start`` upward, or None."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_FILENAME
        if candidate.is_file():
            return candidate
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid TOML: {exc}",
            hint=f"fix the syntax in {path}, or delete it and run `memoir init` again",
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror}", hint="check its permissions"
        ) from exc
    # A relative sqlite path in memoir.toml is relative to the file, not to the caller's cwd.
    url = data.get("database_url")
    if isinstance(url, str) and url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        relative = url.removeprefix("sqlite:///")
        data["database_url"] = "sqlite:///" + str((path.parent / relative).resolve())
    _anchor_workspaces(data, path.parent)
    return data


def _anchor_workspaces(data: dict[str, Any], base: Path) -> None:
    """Relative workspace folders (and the layer file) in memoir.toml are relative to the file
    (``workspace = "."`` in a project's own memoir.toml names that project)."""

    def anchored(value: Any) -> Any:
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            return str((base / value).resolve())
        return value

    server = data.get("server")
    if not isinstance(server, dict):
        return
    server["workspace"] = anchored(server.get("workspace"))
    server["layer_file"] = anchored(server.get("layer_file"))
    if isinstance(server.get("workspaces"), list):
        server["workspaces"] = [anchored(v) for v in server["workspaces"]]
    auth = server.get("auth")
    for token in (auth or {}).get("tokens", []) if isinstance(auth, dict) else []:
        if isinstance(token, dict) and isinstance(token.get("workspaces"), list):
            token["workspaces"] = [anchored(v) for v in token["workspaces"]]


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX) or not value:
            continue
        name = key.removeprefix(ENV_PREFIX).lower()
        if "__" in name:
            section, field = name.split("__", 1)
            if section in _SECTIONS:
                overrides.setdefault(section, {})[field] = value
        elif name in Settings.model_fields and name not in _SECTIONS:
            overrides[name] = value
    return overrides


def _deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        elif value is not None:
            merged[key] = value
    return merged


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Build the settings: explicit ``overrides`` > environment > ``memoir.toml`` > defaults.

    Args:
        overrides: explicit values (e.g. from CLI flags), nested by section.
        cwd: where to start looking for ``memoir.toml`` (default: the working directory).
        environ: the environment to read (default: ``os.environ``).
        config_file: use this file instead of searching for one.

    Raises:
        ConfigError: a value is invalid or the config file is malformed; names the key.
    """
    environ = os.environ if environ is None else environ
    path = config_file or (Path(environ["MEMOIR_CONFIG"]) if environ.get("MEMOIR_CONFIG") else None)
    if path is None:
        path = find_config_file(cwd or Path.cwd())
    data: dict[str, Any] = _read_toml(path) if path else {}
    if path:
        data["config_file"] = str(path)
    data = _deep_merge(data, _env_overrides(environ))
    data = _deep_merge(data, overrides or {})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        source = f" (from {path})" if path else ""
        raise ConfigError(
            f"invalid setting {where!r}{source}: {first['msg']} (got {first.get('input')!r})",
            hint=f"fix {where} in memoir.toml or the environment variable "
            f"{ENV_PREFIX}{where.upper().replace('.', '__')}",
            details={"errors": [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]},
        ) from exc
