"""Store statistics and the checks behind ``memoir doctor``.

The doctor opens the file itself, without migrating or loading anything else, so that a
corrupt, foreign or half-written file yields findings with fixes instead of a traceback.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.request import pathname2url

from memory_core.models import DoctorFinding, StoreStats
from memory_core.storage.sqlite.driver import SqliteDriver, load_vec_extension
from memory_core.storage.sqlite.driver_errors import recovery_hint
from memory_core.storage.sqlite.items import VEC_TABLE, vector_table_dimension
from memory_core.storage.sqlite.meta import EMBEDDER_ID_KEY, EMBEDDING_DIM_KEY, get_meta
from memory_core.storage.sqlite.migrate import available_migrations

__all__ = ["collect_stats", "diagnose_file", "index_consistency", "read_only_reason"]

_COUNTED_TABLES = (
    "resource",
    "item",
    "category",
    "entity",
    "relation",
    "observation",
    "event",
    "run",
    "tombstone",
)


def _size(path: Path | None) -> int | None:
    try:
        return path.stat().st_size if path else None
    except OSError:
        return None


def collect_stats(conn: Any, path: Path | None, url: str, driver: SqliteDriver) -> StoreStats:
    counts = {
        t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in _COUNTED_TABLES
    }
    by_kind = {
        str(kind): int(n)
        for kind, n in conn.execute(
            "SELECT kind, count(*) FROM item WHERE deleted = 0 GROUP BY kind ORDER BY kind"
        )
    }
    has_vec = vector_table_dimension(conn) is not None
    vectors = int(conn.execute(f"SELECT count(*) FROM {VEC_TABLE}").fetchone()[0]) if has_vec else 0
    dim = get_meta(conn, EMBEDDING_DIM_KEY)
    migrations = [
        f"{v:04d}_{n}"
        for v, n in conn.execute("SELECT version, name FROM schema_migration ORDER BY version")
    ]
    return StoreStats(
        url=url,
        backend="sqlite",
        file_bytes=_size(path),
        wal_bytes=_size(path.with_name(path.name + "-wal")) if path else None,
        journal_mode=str(conn.execute("PRAGMA journal_mode").fetchone()[0]),
        schema_migrations=migrations,
        counts=counts,
        items_by_kind=by_kind,
        embedder_id=get_meta(conn, EMBEDDER_ID_KEY),
        embedding_dim=int(dim) if dim else None,
        vectors=vectors,
        sqlite_version=driver.sqlite_version,
        vec_version=driver.vec_version,
        driver=driver.source,
        fts5=True,
    )


def index_consistency(conn: Any) -> dict[str, int]:
    """Counts that must all be zero in a healthy store."""
    result = {
        "items_without_fts": conn.execute(
            "SELECT count(*) FROM item WHERE item_id NOT IN (SELECT rowid FROM item_fts)"
        ).fetchone()[0],
        "fts_without_item": conn.execute(
            "SELECT count(*) FROM item_fts WHERE rowid NOT IN (SELECT item_id FROM item)"
        ).fetchone()[0],
    }
    if vector_table_dimension(conn) is not None:
        result["items_without_vector"] = conn.execute(
            f"SELECT count(*) FROM item WHERE item_id NOT IN (SELECT item_id FROM {VEC_TABLE})"
        ).fetchone()[0]
        result["vectors_without_item"] = conn.execute(
            f"SELECT count(*) FROM {VEC_TABLE} WHERE item_id NOT IN (SELECT item_id FROM item)"
        ).fetchone()[0]
    return {k: int(v) for k, v in result.items()}


def read_only_reason(path: Path) -> str | None:
    """Why memoir could not write ``path`` (None when it can): a read-only file system, or no
    write permission on the file or on its folder."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        return None
    if not os.access(path, os.W_OK):
        return "no write permission on the file"
    if not os.access(path.parent, os.W_OK):
        return "no write permission on its folder"
    return None


def _permissions(path: Path) -> DoctorFinding:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return DoctorFinding(
            "file_permissions",
            "warning",
            f"{path} is readable or writable by other users (mode {mode:04o})",
            fix=f"chmod 600 {path}",
        )
    return DoctorFinding("file_permissions", "ok", f"mode {mode:04o} (owner only)")


def diagnose_file(
    path: Path | None,
    driver: SqliteDriver,
    *,
    configured_embedder: str | None,
    extra_checks: Sequence[Callable[[Any], list[DoctorFinding]]] = (),
) -> list[DoctorFinding]:
    """Run every storage check on the file at ``path`` (None: in-memory, nothing to check).

    ``extra_checks`` are feature checks (documents, rules…) run on the same connection once the
    file is known to be a healthy memoir store.
    """
    findings: list[DoctorFinding] = []
    if path is None:
        return [DoctorFinding("file", "ok", "in-memory database")]
    if not path.exists():
        return [
            DoctorFinding(
                "file",
                "error",
                f"no database at {path}",
                fix=f"create it with `memoir init {path.parent}`",
            )
        ]
    findings.append(_permissions(path))
    read_only = read_only_reason(path)
    if read_only is not None:
        findings.append(
            DoctorFinding(
                "writable",
                "error",
                f"{path} is read-only ({read_only}): memoir can read it but every write fails",
                fix="remount the file system read-write, or give this user write permission on "
                f"{path} and its folder (WAL needs to create files beside it)",
            )
        )
    try:
        # A read-only store is checked through an immutable read-only connection: opening it
        # normally fails (no -shm can be created), which is not corruption.
        target, uri = (
            (f"file:{pathname2url(str(path))}?immutable=1", True)
            if read_only is not None
            else (str(path), False)
        )
        conn = driver.connect(
            target, uri=uri, isolation_level=None, check_same_thread=False, timeout=5
        )
    except Exception as exc:
        return [
            *findings,
            DoctorFinding("open", "error", f"cannot open {path}: {exc}", fix=recovery_hint(path)),
        ]
    try:
        try:
            load_vec_extension(conn)
            findings.append(
                DoctorFinding(
                    "sqlite_vec",
                    "ok",
                    f"sqlite-vec {driver.vec_version} loaded ({driver.source} driver)",
                )
            )
        except Exception as exc:
            findings.append(
                DoctorFinding(
                    "sqlite_vec",
                    "error",
                    f"sqlite-vec failed to load: {exc}",
                    fix="pip install sqlite-vec pysqlite3-binary",
                )
            )
        try:
            rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
        except Exception as exc:
            findings.append(
                DoctorFinding(
                    "integrity",
                    "error",
                    f"{path} is not a readable SQLite database: {exc}",
                    fix=recovery_hint(path),
                )
            )
            return findings
        if rows != ["ok"]:
            findings.append(
                DoctorFinding(
                    "integrity",
                    "error",
                    "integrity_check failed: " + "; ".join(rows[:5]),
                    fix=recovery_hint(path),
                )
            )
            return findings
        findings.append(DoctorFinding("integrity", "ok", "PRAGMA integrity_check: ok"))
        # An immutable connection reports "delete" whatever the file uses: not checked then.
        mode = "wal" if read_only else str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        findings.append(
            DoctorFinding("journal_mode", "ok", "WAL")
            if mode.lower() == "wal"
            else DoctorFinding(
                "journal_mode",
                "warning",
                f"journal mode is {mode}, not WAL",
                fix="open the store once with memoir (it switches to WAL)",
            )
        )
        has_schema = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'schema_migration'"
        ).fetchone()
        if not has_schema:
            findings.append(
                DoctorFinding(
                    "schema",
                    "error",
                    f"{path} is a SQLite file but not a memoir store",
                    fix=f"point --db at a memoir store, or run `memoir init {path.parent}`",
                )
            )
            return findings
        applied = {r[0] for r in conn.execute("SELECT version FROM schema_migration")}
        pending = [m for m in available_migrations() if m.version not in applied]
        findings.append(
            DoctorFinding("schema", "ok", f"{len(applied)} migrations applied")
            if not pending
            else DoctorFinding(
                "schema",
                "warning",
                f"{len(pending)} migrations pending",
                fix="open the store with memoir once (migrations run on open)",
            )
        )
        try:
            conn.execute("SELECT count(*) FROM item_fts WHERE item_fts MATCH 'x'").fetchone()
            findings.append(DoctorFinding("fts5", "ok", "FTS5 index readable"))
        except Exception as exc:
            findings.append(
                DoctorFinding(
                    "fts5",
                    "error",
                    f"FTS5 index unreadable: {exc}",
                    fix="run `memoir reembed` to rebuild the indexes",
                )
            )
        try:
            gaps = index_consistency(conn)
            bad = {k: v for k, v in gaps.items() if v}
            findings.append(
                DoctorFinding("index_consistency", "ok", "every item has its FTS and vector rows")
                if not bad
                else DoctorFinding(
                    "index_consistency",
                    "error",
                    f"index rows out of step with items: {bad}",
                    fix="run `memoir reembed` to rebuild the FTS and vector rows",
                )
            )
        except Exception as exc:
            findings.append(
                DoctorFinding(
                    "index_consistency",
                    "error",
                    f"could not compare indexes: {exc}",
                    fix=recovery_hint(path),
                )
            )
        stored = get_meta(conn, EMBEDDER_ID_KEY)
        if configured_embedder is not None and stored is not None and stored != configured_embedder:
            findings.append(
                DoctorFinding(
                    "embedder_match",
                    "error",
                    f"store built with {stored!r}, configured {configured_embedder!r}",
                    fix="run `memoir reembed`, or set embedding.model back",
                )
            )
        elif stored is not None:
            findings.append(DoctorFinding("embedder_match", "ok", f"vectors from {stored}"))
        for check in extra_checks:
            try:
                findings += check(conn)
            except Exception as exc:  # a feature check must not hide the storage findings
                findings.append(
                    DoctorFinding(
                        getattr(check, "__name__", "feature_check"),
                        "error",
                        f"check failed: {exc}",
                        fix="run `memoir doctor --json` and report the finding",
                    )
                )
    finally:
        conn.close()
    return findings
