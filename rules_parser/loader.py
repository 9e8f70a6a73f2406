"""The one module that touches the file system: find rule files and load them.

``discover_rule_files`` walks a folder for every supported format; ``load`` reads one file
and parses it, turning unreadable, oversized or non-UTF-8 files into an error issue instead of
an exception, so a batch always completes.
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from rules_parser.formats import path_format
from rules_parser.issues import IssueSink
from rules_parser.models import Format, ParseResult
from rules_parser.parse import parse

__all__ = ["MAX_FILE_BYTES", "discover_rule_files", "load"]

log = structlog.get_logger(__name__)

MAX_FILE_BYTES = 2 * 1024 * 1024
_SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", "dist", "build"})
# Hidden folders where tools keep rules; every other hidden folder is skipped.
_RULE_DIRS = frozenset({".cursor", ".roo", ".github", ".clinerules"})
_MARKDOWN_SUFFIXES = (".md", ".mdc", ".markdown")
_RULE_DOTFILES = frozenset({".clinerules", ".cursorrules", ".roorules"})


def _is_rule_file(relative: Path, include_plain: bool) -> bool:
    name = relative.name.lower()
    claimed = path_format(relative.as_posix())
    inside_hidden = any(part.startswith(".") for part in relative.parts[:-1])
    if claimed is not None:
        # Tool folders may hold plain text rule files (Roo, Cline); elsewhere only markdown.
        if claimed in ("roo_rules", "clinerules") and inside_hidden:
            return not name.startswith(".") or name in _RULE_DOTFILES
        return (
            name.endswith(_MARKDOWN_SUFFIXES)
            or name in _RULE_DOTFILES
            or name.startswith((".roorules-", ".clinerules-"))
        )
    if inside_hidden:  # e.g. .github/ISSUE_TEMPLATE/bug.md is not a rule file
        return False
    return include_plain and name.endswith((".md", ".markdown")) and not name.startswith(".")


def discover_rule_files(root: Path, *, include_plain: bool = True) -> list[Path]:
    """Find every rule file under ``root``, in a stable (sorted) order.

    Picks up the template and plain markdown (``*.md``), ``AGENTS.md``, ``CLAUDE.md``,
    ``.cursor/rules/**/*.mdc``, ``.clinerules`` (file or folder), ``.roo/rules*/**``,
    ``.github/copilot-instructions.md`` and ``*.instructions.md``. Skips ``.git``,
    ``node_modules``, ``.venv`` and hidden folders other than ``.cursor``, ``.roo``,
    ``.github`` and ``.clinerules``. Never follows a symlink that leads outside ``root``,
    and never descends into symlinked folders (no loops).

    Args:
        root: the folder to walk (a single file is returned as is if it is a rule file).
        include_plain: also return markdown files no tool claims (READMEs, docs).

    Returns:
        Absolute paths of rule files.
    """
    base = root.resolve()
    if base.is_file():
        return [base]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        current = Path(dirpath)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in _SKIP_DIRS
            and (not d.startswith(".") or d in _RULE_DIRS)
            and not (current / d).is_symlink()
        )
        for filename in sorted(filenames):
            candidate = current / filename
            relative = candidate.relative_to(base)
            if not _is_rule_file(relative, include_plain):
                continue
            if candidate.is_symlink():
                try:
                    target = candidate.resolve(strict=True)
                except (OSError, RuntimeError):  # dangling or looping link
                    continue
                if not target.is_relative_to(base) or not target.is_file():
                    log.warning("rule_file_symlink_skipped", path=str(relative))
                    continue
            found.append(candidate)
    return found


def load(
    path: Path, *, display_path: str | None = None, format: Format | None = None
) -> ParseResult:
    """Read and parse one rule file; never raises for a bad file.

    Args:
        path: the file to read.
        display_path: the path to record in the document and issues (e.g. relative to the
            project root); defaults to ``str(path)``. Format detection uses it too.
        format: force a format instead of detecting it.

    Returns:
        The parse result. Unreadable, larger than ``MAX_FILE_BYTES``, or non-UTF-8 files give
        ``document=None`` and one error issue naming the problem.
    """
    shown = display_path or str(path)
    issues = IssueSink(shown)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            issues.error(
                1,
                f"file is {size} bytes, over the {MAX_FILE_BYTES} byte limit for rule files; "
                "split it into smaller documents",
                field="file",
            )
            return ParseResult(document=None, issues=issues.sorted())
        data = path.read_bytes()
    except FileNotFoundError:
        issues.error(1, "file does not exist; check the path", field="file")
        return ParseResult(document=None, issues=issues.sorted())
    except IsADirectoryError:
        issues.error(1, "path is a folder, not a file; use discover_rule_files", field="file")
        return ParseResult(document=None, issues=issues.sorted())
    except OSError as exc:
        issues.error(1, f"cannot read file: {exc.strerror or type(exc).__name__}", field="file")
        return ParseResult(document=None, issues=issues.sorted())
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        issues.error(
            line,
            f"file is not valid UTF-8 (byte offset {exc.start}); re-save it as UTF-8",
            field="encoding",
        )
        return ParseResult(document=None, issues=issues.sorted())
    return parse(text, shown, format=format)
