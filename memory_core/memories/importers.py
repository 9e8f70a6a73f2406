"""Importers: memoir JSONL, the official memory server's ``memory.jsonl``, Claude Code's
auto-memory folder. Parsing is pure (``parse_*``); :func:`run_import` writes through the
service, so imported memories go through the same write path (dedupe, importance, cap).

- **memoir JSONL**: a ``memoir memory export`` file is restored losslessly
  (:mod:`memory_core.memories.transfer`); any other JSONL is one memory per line with the
  fields of ``memoir memory add``: ``text`` (required), ``space``, ``user``, ``role``, ``tags``,
  ``source_ids``, ``created_at``, ``saved`` (or ``manually_saved``), ``pin``.
- **official** (``@modelcontextprotocol/server-memory``): one JSON object per line,
  ``{"type": "entity", "name", "entityType", "observations": […]}`` or
  ``{"type": "relation", "from", "to", "relationType"}``. The graph goes into memoir's graph
  tables (the compatibility tools read it back) and each observation and relation becomes a
  memory (``"<name>: <observation>"``, ``"<from> <relationType> <to>"``) tagged with the
  entity, with ``official:<name>`` as its source id.
- **claude-code**: a folder with ``MEMORY.md`` (an index of ``- [Title](file.md) — hook``
  lines, or plain bullet facts) and one markdown file per memory with front matter
  (``name``, ``description``, ``type``: user | feedback | project | reference). A file's body
  (else its description) is the memory; ``type`` and ``name`` become tags; the file's mtime
  is ``created_at``; ``claude-code:<file>`` is the source id.

A malformed line or file is reported with its line number (or file name) and skipped; the
rest is imported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.memories import transfer
from memory_core.memories.responses import ImportIssue, ImportReport
from memory_core.memories.spaces import MemorySpace

if TYPE_CHECKING:
    from memory_core.context import CoreContext
    from memory_core.memories.service import MemoryService

__all__ = [
    "FORMATS",
    "ClaudeMemory",
    "OfficialGraphData",
    "parse_claude_folder",
    "parse_official",
    "run_import",
]

FORMATS = ("jsonl", "official", "claude-code")
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?", re.DOTALL)
_INDEX_LINK = re.compile(r"^\s*[-*]\s*\[([^\]]+)\]\(([^)]+)\)\s*(?:[—:-]+\s*(.*))?$")
_BULLET = re.compile(r"^\s*[-*]\s+(.+)$")
_MAX_FILES = 2000


@dataclass
class OfficialGraphData:
    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ImportIssue] = field(default_factory=list)


def _lines(source: IO[str] | Iterable[str] | str | Path) -> Iterator[str]:
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_file():
            raise NotFoundError(f"no file {str(path)!r}", hint="check the path to import")
        with path.open(encoding="utf-8") as handle:
            yield from handle
        return
    yield from source


def parse_official(lines: Iterable[str]) -> OfficialGraphData:
    """The entities and relations of a ``memory.jsonl`` (malformed lines reported, skipped)."""
    data = OfficialGraphData()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            kind = record.get("type") if isinstance(record, dict) else None
            if kind == "entity":
                name, entity_type = record["name"], record["entityType"]
                observations = record.get("observations", [])
                if (
                    not isinstance(name, str)
                    or not isinstance(entity_type, str)
                    or not isinstance(observations, list)
                ):
                    raise ValueError("name and entityType must be strings, observations a list")
                data.entities.append(
                    {"name": name, "entityType": entity_type,
                     "observations": [str(o) for o in observations]}
                )  # fmt: skip
            elif kind == "relation":
                values = [record["from"], record["to"], record["relationType"]]
                if not all(isinstance(v, str) for v in values):
                    raise ValueError("from, to and relationType must be strings")
                data.relations.append(
                    {"from": values[0], "to": values[1], "relationType": values[2]}
                )
            else:
                raise ValueError(f"unknown type {kind!r} (expected entity or relation)")
        except (json.JSONDecodeError, KeyError, ValueError, AttributeError) as exc:
            data.errors.append(ImportIssue(line=number, error=f"{type(exc).__name__}: {exc}"[:300]))
    return data


@dataclass(frozen=True)
class ClaudeMemory:
    file: str
    text: str
    tags: tuple[str, ...]
    created_at: str | None
    title: str | None = None


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    match = _FRONT.match(text)
    if not match:
        return {}, text
    fields: dict[str, str] = {}
    for line in match.group(1).splitlines():
        if ":" in line and not line.startswith((" ", "\t", "#")):
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip().strip("'\"")
    return fields, text[match.end() :]


def parse_claude_folder(folder: Path) -> tuple[list[ClaudeMemory], list[ImportIssue]]:
    """The memories of a Claude Code auto-memory folder (see the module docstring).

    Raises:
        NotFoundError: not a folder, or no ``MEMORY.md`` and no markdown files in it.
    """
    if not folder.is_dir():
        raise NotFoundError(
            f"{str(folder)!r} is not a folder",
            hint="pass the auto-memory folder, e.g. ~/.claude/projects/<project>/memory",
        )
    memories: list[ClaudeMemory] = []
    issues: list[ImportIssue] = []
    index = folder / "MEMORY.md"
    linked: dict[str, str] = {}
    if index.is_file():
        for number, line in enumerate(index.read_text(encoding="utf-8").splitlines(), start=1):
            link = _INDEX_LINK.match(line)
            if link:
                linked[link.group(2).strip()] = link.group(1).strip()
                continue
            bullet = _BULLET.match(line)
            if bullet:
                memories.append(
                    ClaudeMemory(
                        f"MEMORY.md:{number}", bullet.group(1).strip(), ("claude-code",), None
                    )
                )
    files = sorted(p for p in folder.glob("*.md") if p.name != "MEMORY.md")[:_MAX_FILES]
    if not index.is_file() and not files:
        raise NotFoundError(
            f"no MEMORY.md and no memory files in {str(folder)!r}",
            hint="pass the folder that holds MEMORY.md",
        )
    for path in files:
        try:
            fields, body = _front_matter(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            issues.append(ImportIssue(line=0, error=f"{path.name}: {exc}"[:300]))
            continue
        text = " ".join(body.split()) or fields.get("description", "")
        if not text:
            issues.append(ImportIssue(line=0, error=f"{path.name}: no body and no description"))
            continue
        name = fields.get("name") or linked.get(path.name) or path.stem
        tags = tuple(t for t in ("claude-code", fields.get("type", ""), name) if t)
        mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="microseconds")
        memories.append(ClaudeMemory(path.name, text, tags, mtime, title=name))
    return memories, issues


async def _import_jsonl(
    service: MemoryService,
    ctx: CoreContext,
    lines: Iterator[str],
    space: MemorySpace | None,
    report: ImportReport,
) -> bool:
    """Import JSONL lines; True when they were a memoir export (restored as they were)."""
    numbered: list[tuple[int, dict[str, Any]]] = []
    header: dict[str, Any] | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except (json.JSONDecodeError, ValueError) as exc:
            report.errors.append(
                ImportIssue(line=number, error=f"{type(exc).__name__}: {exc}"[:300])
            )
            report.skipped += 1
            continue
        if header is None and transfer.is_export_header(record):
            header = record
            continue
        numbered.append((number, record))
    if header is not None:
        await transfer.import_lossless(ctx, header, numbered, space=space, report=report)
        return True
    for number, record in numbered:
        try:
            target = space or MemorySpace(
                str(record.get("user") or service.settings_.default_user), str(record["space"])
            )
            result = await service.remember(
                str(record["text"]),
                space=target.space,
                user=target.user,
                role=str(record.get("role", "user")),
                tags=list(record.get("tags") or ()),
                source_ids=list(record.get("source_ids") or ()),
                created_at=record.get("created_at"),
                manually_saved=bool(record.get("saved", record.get("manually_saved", False))),
                pin=bool(record.get("pin", False)),
                embed_now=False,
            )
        except (KeyError, TypeError, InvalidInputError) as exc:
            message = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            report.errors.append(ImportIssue(line=number, error=message[:300]))
            report.skipped += 1
            continue
        _count(report, result.status)
    return False


def _count(report: ImportReport, status: str) -> None:
    if status == "created":
        report.imported += 1
    elif status == "merged":
        report.merged += 1
    else:
        report.skipped += 1


async def run_import(
    service: MemoryService,
    ctx: CoreContext,
    source: IO[str] | Iterable[str] | str | Path,
    *,
    format: str,
    space: MemorySpace | None,
) -> ImportReport:
    """Import ``source`` in ``format`` (see the module docstring), then embed the new entries."""
    if format not in FORMATS:
        raise InvalidInputError(
            f"unknown import format {format!r}", hint="use " + ", ".join(FORMATS)
        )
    report = ImportReport(format=format)
    restored = False
    if format == "jsonl":
        restored = await _import_jsonl(service, ctx, _lines(source), space, report)
    else:
        if space is None:
            raise InvalidInputError(
                f"the {format} format has no space of its own", hint="pass --space (and --user)"
            )
        if format == "official":
            data = parse_official(_lines(source))
            report.errors.extend(data.errors)
            report.skipped += len(data.errors)
            await service.graph.load(space, data.entities, data.relations)
            report.entities, report.relations = len(data.entities), len(data.relations)
            for entity in data.entities:
                for observation in entity["observations"]:
                    result = await service.remember(
                        f"{entity['name']}: {observation}", space=space.space, user=space.user,
                        tags=[entity["name"], entity["entityType"]],
                        source_ids=[f"official:{entity['name']}"], embed_now=False,
                    )  # fmt: skip
                    _count(report, result.status)
            for relation in data.relations:
                result = await service.remember(
                    f"{relation['from']} {relation['relationType']} {relation['to']}",
                    space=space.space, user=space.user, tags=[relation["from"], relation["to"]],
                    source_ids=[f"official:{relation['from']}"], embed_now=False,
                )  # fmt: skip
                _count(report, result.status)
        else:
            if not isinstance(source, str | Path):
                raise InvalidInputError(
                    "the claude-code format reads a folder", hint="pass the folder's path"
                )
            memories, issues = parse_claude_folder(Path(source))
            report.errors.extend(issues)
            report.skipped += len(issues)
            for memory in memories:
                result = await service.remember(
                    memory.text, space=space.space, user=space.user, tags=list(memory.tags),
                    source_ids=[f"claude-code:{memory.file}"], created_at=memory.created_at,
                    embed_now=False,
                )  # fmt: skip
                _count(report, result.status)
    # A restored export keeps its queue as it was (lossless); new entries are embedded now.
    if not restored and service.settings_.embed_on_write and ctx.embedder.is_ready():
        backfill = await service.backfill(
            space=space.space if space else None, user=space.user if space else None
        )
        report.warnings.extend(backfill.warnings)
    return report
