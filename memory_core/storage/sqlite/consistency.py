"""Consistency checks of items against their resources, for ``memoir doctor``.

Counts that are zero in a healthy store: items of a missing or removed resource, two live
resources of one kind at one path, documents with text but no chunks, removed documents
waiting for compaction. Each count becomes a finding with its fix.
"""

from __future__ import annotations

from typing import Any, Literal

from memory_core.kinds import CHUNK, DOCUMENT
from memory_core.models import DoctorFinding

__all__ = ["consistency_counts", "consistency_findings", "findings_from_counts"]


def consistency_counts(conn: Any) -> dict[str, int]:
    def one(sql: str, *params: Any) -> int:
        return int(conn.execute(sql, params).fetchone()[0])

    return {
        "chunks_without_document": one(
            "SELECT count(*) FROM item WHERE kind = ? AND (resource_id IS NULL OR "
            "resource_id NOT IN (SELECT resource_id FROM resource))",
            CHUNK,
        ),
        "chunks_of_removed_documents": one(
            "SELECT count(*) FROM item JOIN resource USING (resource_id) "
            "WHERE item.kind = ? AND resource.deleted = 1",
            CHUNK,
        ),
        "duplicate_live_paths": one(
            "SELECT count(*) FROM (SELECT scope, uri FROM resource WHERE kind = ? AND "
            "deleted = 0 GROUP BY scope, uri HAVING count(*) > 1)",
            DOCUMENT,
        ),
        "documents_without_chunks": one(
            "SELECT count(*) FROM resource WHERE kind = ? AND deleted = 0 AND size > 0 AND "
            "resource_id NOT IN (SELECT resource_id FROM item WHERE resource_id IS NOT NULL)",
            DOCUMENT,
        ),
        "tombstoned_documents": one(
            "SELECT count(*) FROM resource WHERE kind = ? AND deleted = 1", DOCUMENT
        ),
    }


def findings_from_counts(counts: dict[str, int]) -> list[DoctorFinding]:
    """Doctor findings from :func:`consistency_counts` (pure)."""
    findings: list[DoctorFinding] = []

    def check(
        name: str,
        bad: int,
        message: str,
        fix: str,
        level: Literal["warning", "error"] = "error",
    ) -> None:
        if bad:
            findings.append(DoctorFinding(name, level, f"{bad} {message}", fix=fix))
        else:
            findings.append(DoctorFinding(name, "ok", f"no {message}"))

    check(
        "documents.orphan_chunks",
        counts["chunks_without_document"],
        "chunks without a document",
        "run `memoir compact`, then re-add the affected files",
    )
    check(
        "documents.removed_chunks",
        counts["chunks_of_removed_documents"],
        "chunks of removed documents still indexed",
        "run `memoir compact`",
    )
    check(
        "documents.duplicate_paths",
        counts["duplicate_live_paths"],
        "paths with more than one live document",
        "run `memoir rm <path>` then `memoir add <path>`",
    )
    check(
        "documents.empty",
        counts["documents_without_chunks"],
        "non-empty documents without chunks",
        "re-add them with `memoir add <path>`",
        level="warning",
    )
    check(
        "documents.tombstones",
        counts["tombstoned_documents"],
        "removed documents waiting for compaction",
        "run `memoir compact` to reclaim the space",
        level="warning",
    )
    return findings


def consistency_findings(conn: Any) -> list[DoctorFinding]:
    return findings_from_counts(consistency_counts(conn))
