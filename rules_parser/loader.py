"""The one module that touches the file system: find rule files and load them.

``discover`` walks a folder for every rule file a team has and says why it skipped the rest;
``discover_rule_files`` is its list of files; ``load`` reads one file and parses it, turning
unreadable, oversized or non-UTF-8 files into an error issue instead of an exception, so a batch
always completes.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from rules_parser.formats import declares_template, path_format
from rules_parser.frontmatter import split_front_matter
from rules_parser.issues import IssueSink
from rules_parser.models import Format, ParseResult
from rules_parser.parse import parse

__all__ = ["MAX_FILE_BYTES", "Discovery", "discover", "discover_rule_files", "load"]

log = structlog.get_logger(__name__)

MAX_FILE_BYTES = 2 * 1024 * 1024
_SKIP_DIRS = frozenset(
    {".git", "node_modules", ".venv", "venv", "__pycache__", "dist", "build", "vendor", "target"}
)
# Hidden folders where tools keep rules; every other hidden folder is skipped.
_RULE_DIRS = frozenset(
    {".cursor", ".roo", ".github", ".clinerules", ".claude", ".windsurf", ".gemini", ".agents"}
)
_MARKDOWN_SUFFIXES = (".md", ".mdc", ".markdown")
_RULE_DOTFILES = frozenset({".clinerules", ".cursorrules", ".roorules", ".windsurfrules"})
# Files tools read by name, wherever they sit.
_RULE_NAMES = frozenset({"agents.md", "agent.md", "claude.md", "claude.local.md", "gemini.md"})
# A folder with one of these names holds rules: every markdown file under it is read.
_RULE_FOLDER_NAMES = frozenset(
    {
        "rules",
        "rule",
        ".rules",
        "cursorrules",
        "agent-rules",
        "ai-rules",
        "guidelines",
        "conventions",
        "coding-standards",
        "standards",
        "instructions",
        "policies",
    }
)
# Front matter keys that mark a markdown file as a rule (Cursor, Copilot, Claude, rule folders).
_RULE_FRONT_MATTER = frozenset(
    {"description", "globs", "applyto", "tags", "impact", "alwaysapply", "paths", "trigger"}
)
# "@docs/rules.md" imports (Claude, Gemini) and markdown links to local files.
_IMPORT_RE = re.compile(r"(?:^|\s)@(?P<path>[\w./~-]+\.(?:md|mdc|markdown|txt))\b", re.M)
_LINK_RE = re.compile(r"\[[^\]]*\]\((?P<path>[^)\s#]+\.(?:md|mdc|markdown))(?:#[^)]*)?\)")
# "[the guides](contributing/)": a link to a folder of docs (a trailing slash, or no suffix).
_DIR_LINK_RE = re.compile(r"\[[^\]]*\]\((?!\w+:)(?P<path>\.{0,2}/?[\w-]+(?:/[\w.-]+)*/?)\)")
# A path in a code span (`docs/testing.md`) is followed when its line, or the header of its
# table, points the reader at it: "see `x.md`", "read `x.md`", "| Task | Guide |".
_SPAN_RE = re.compile(r"`(?P<path>[\w./-]+\.(?:md|mdc|markdown))`")
_READING_CUE_RE = re.compile(
    r"\b(?:see|read|refer|consult|follow|conform|per|guides?|guidelines?|conventions?|"
    r"instructions|walkthrough|overview|details)\b",
    re.I,
)
# Files a project keeps for other purposes: never rules, however they are referenced.
_NOT_RULES_RE = re.compile(
    r"^(?:changelog|changes|history|license|licence|code_of_conduct|security|authors|"
    r"notice|release(?:_notes)?)(?:\.|$)",
    re.I,
)
_IMPORTING_NAMES = _RULE_NAMES | {"copilot-instructions.md"}
_MAX_IMPORT_DEPTH = 4
# CONTRIBUTING.md where GitHub looks for it (the root, .github/, docs/ of the folder read) is
# the team's rules for contributors, and an agent changing the code is one: always taken (and
# reported as such); ``--exclude CONTRIBUTING.md`` leaves it out. Nested ones (a vendored
# package's) are plain markdown unless an agent rule file points to them.
_CONTRIBUTING_PLACES = frozenset(
    {"contributing.md", ".github/contributing.md", "docs/contributing.md"}
)


@dataclass
class Discovery:
    """What a folder walk found: the rule files, and every markdown file it left out, with why.

    Attributes:
        files: absolute paths of rule files, in a stable order (walk order, then imports).
        skipped: (absolute path, reason) for markdown files and links not taken.
        reasons: absolute path -> why each file was taken ("AGENTS.md", "imported by …").
    """

    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    reasons: dict[Path, str] = field(default_factory=dict)


def _matches(relative: str, patterns: Sequence[str]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    for pattern in patterns:
        pattern = pattern.strip().lstrip("./") if pattern.startswith("./") else pattern.strip()
        if pattern.endswith("/"):
            pattern += "**"
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(name, pattern):
            return True
        if pattern.startswith("**/") and fnmatch.fnmatch(relative, pattern[3:]):
            return True
        if relative.startswith(pattern.rstrip("/") + "/"):
            return True
    return False


def _head(path: Path, limit: int = 8192) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(limit).decode("utf-8-sig", errors="replace")
    except OSError:
        return ""


def _rule_front_matter(text: str) -> bool:
    if not text.startswith("---"):
        return False
    front = split_front_matter(text.replace("\r\n", "\n").split("\n"))
    if front is None:
        return False
    keys = {re.sub(r"[^a-z]", "", k.lower()) for k in front.values}
    return not keys.isdisjoint(_RULE_FRONT_MATTER)


def _classify(relative: Path, path: Path, root_name: str) -> tuple[str | None, str]:
    """(why it is a rule file, or None; why not)."""
    name = relative.name.lower()
    parts = [p.lower() for p in relative.parts[:-1]]
    claimed = path_format(relative.as_posix())
    if relative.as_posix().lower() in _CONTRIBUTING_PLACES:
        return "CONTRIBUTING.md: the team's rules for contributors", ""
    inside_hidden = any(part.startswith(".") for part in parts)
    if name in _RULE_NAMES:
        return name.upper().replace(".MD", ".md"), ""
    if name in _RULE_DOTFILES or name.startswith((".roorules-", ".clinerules-")):
        return f"{name} file", ""
    if claimed in ("roo_rules", "clinerules") and inside_hidden:
        if not name.startswith(".") or name in _RULE_DOTFILES:
            return f"{claimed.replace('_', ' ')} folder", ""
        return None, "hidden file in a rules folder"
    markdown = name.endswith(_MARKDOWN_SUFFIXES)
    if not markdown:
        return None, "not markdown"
    if claimed is not None:
        return claimed.replace("_", " "), ""
    if ".claude" in parts and "rules" in parts:
        return ".claude/rules", ""
    if ".windsurf" in parts and "rules" in parts:
        return ".windsurf/rules", ""
    if ".agents" in parts or ".gemini" in parts:
        return "agent rules folder", ""
    if inside_hidden:
        # e.g. .github/ISSUE_TEMPLATE/bug.md is not a rule file
        return None, "markdown in a hidden folder that is not a rules folder"
    head = _head(path)
    if _rule_front_matter(head):
        return "rule front matter", ""
    if declares_template(head):
        return "memoir rule template", ""
    folders = [root_name.lower(), *parts]
    if any(part in _RULE_FOLDER_NAMES for part in folders):
        return "markdown in a rules folder", ""
    return None, (
        "plain markdown: no rule front matter, not in a rules folder, not imported by "
        "AGENTS.md / CLAUDE.md; pass it by name or with --include to ingest it"
    )


def _spans_to_read(text: str) -> list[str]:
    """Paths in code spans on lines (or tables) that point the reader at them."""
    found: list[str] = []
    header = ""
    previous_was_row = False
    for line in text.split("\n"):
        row = line.lstrip().startswith("|")
        if row and not previous_was_row:
            header = line  # the first row of a table names its columns
        previous_was_row = row
        paths = [m.group("path") for m in _SPAN_RE.finditer(line)]
        if not paths:
            continue
        context = f"{header} {line}" if row else line
        if _READING_CUE_RE.search(_SPAN_RE.sub(" ", context)):
            found += paths
    return found


def _markdown_in(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and p.name.lower().endswith(_MARKDOWN_SUFFIXES) and not p.is_symlink()
    )


def _imports(path: Path, base: Path) -> list[tuple[Path, str | None]]:
    """Local files an AGENTS.md / CLAUDE.md imports (``@path``) or points to as reading.

    Followed: ``@path`` imports; markdown links to files, and to folders (their markdown
    files, one level); paths in code spans on a line that points the reader at them ("see
    `docs/testing.md`", a table with a "Guide" column), relative to the importing file or, failing
    that, to the folder read. Changelogs, licences and the like are never followed.

    Returns:
        (target, None) for a file to read, (target, why not) for one left out.
    """
    text = _head(path, MAX_FILE_BYTES)
    importer = path.relative_to(base).as_posix()
    found: list[tuple[Path, str | None]] = []
    seen: set[str] = set()
    raw = [(m.group("path"), "file") for m in _IMPORT_RE.finditer(text)]
    raw += [(m.group("path"), "file") for m in _LINK_RE.finditer(text)]
    raw += [(m.group("path").rstrip("/"), "folder") for m in _DIR_LINK_RE.finditer(text)]
    raw += [(p, "span") for p in _spans_to_read(text)]
    for target, kind in raw:
        if target in seen or "://" in target or not target:
            continue
        seen.add(target)
        if _NOT_RULES_RE.match(target.rsplit("/", 1)[-1]):
            continue
        if target.startswith("~"):
            found.append((Path(target), f"imported by {importer}: a home-folder file is personal"))
            continue
        if target.startswith("/"):
            candidates = [base / target[1:]]
        else:
            candidates = [path.parent / target, base / target]
        resolved = None
        for candidate in candidates:
            try:
                resolved = candidate.resolve(strict=True)
                break
            except (OSError, RuntimeError):
                continue
        if resolved is None:
            if kind == "file":
                found.append((candidates[0], f"imported by {importer} but missing"))
            continue
        if kind == "folder" and not resolved.is_dir():
            continue
        if not resolved.is_relative_to(base):
            found.append((resolved, f"imported by {importer} from outside the folder read"))
            continue
        if resolved.is_file():
            found.append((resolved, None))
        elif kind == "folder" and resolved != base:
            found += [(p, None) for p in _markdown_in(resolved)]
    return found


def discover(
    root: Path,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    take_plain: bool = False,
) -> Discovery:
    """Find every rule file under ``root`` and say why each other markdown file was left out.

    Takes: ``AGENTS.md`` / ``CLAUDE.md`` / ``GEMINI.md`` at any depth; ``.cursor/rules/**``
    (``.mdc`` and ``.md``), ``.claude/rules/``, ``.windsurf/rules/``, ``.clinerules`` (file or
    folder), ``.roo/rules*/``, ``.github/copilot-instructions.md`` and ``*.instructions.md``;
    markdown with rule-like front matter (description, globs, applyTo, tags, impact,
    alwaysApply, paths) or in a folder named for rules (``rules/``, ``guidelines/``…); the
    template; ``CONTRIBUTING.md`` at the root, in ``.github/`` or ``docs/`` (the team's rules
    for contributors); and what an AGENTS.md / CLAUDE.md / copilot-instructions points to as
    reading, a few hops deep: ``@path`` imports, markdown links to files and to folders of docs
    (their markdown files), and paths in code spans the line tells the reader to read ("see
    `contributing/testing.md`", a table with a "Guide" column). Skips
    ``.git``, ``node_modules``, virtual envs and other hidden folders, and never follows a
    symlink that leads outside ``root`` (nor into symlinked folders: no loops).

    Args:
        root: the folder to walk (a single file is returned as is).
        include: glob patterns (relative to ``root``) of files to take whatever they are.
        exclude: glob patterns of files to leave out (wins over everything).
        take_plain: also take markdown files no rule convention claims (READMEs, docs).

    Returns:
        The discovery: files taken, files skipped with their reasons.
    """
    base = root.resolve()
    found = Discovery()
    if base.is_file():
        found.files.append(base)
        found.reasons[base] = "named"
        return found
    taken: set[Path] = set()
    importers: list[Path] = []

    def take(path: Path, why: str) -> None:
        if path not in taken:
            taken.add(path)
            found.files.append(path)
            found.reasons[path] = why

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
            shown = relative.as_posix()
            if candidate.is_symlink():
                try:
                    target = candidate.resolve(strict=True)
                except (OSError, RuntimeError):  # dangling or looping link
                    continue
                if not target.is_relative_to(base) or not target.is_file():
                    log.warning("rule_file_symlink_skipped", path=shown)
                    found.skipped.append((candidate, "symlink leading outside the folder"))
                    continue
            if exclude and _matches(shown, exclude):
                found.skipped.append((candidate, "excluded by --exclude"))
                continue
            if include and _matches(shown, include):
                take(candidate, "included by --include")
                continue
            why, why_not = _classify(relative, candidate, base.name)
            if why is None and take_plain and why_not.startswith("plain markdown"):
                why = "plain markdown"
            if why is None:
                if why_not != "not markdown":
                    found.skipped.append((candidate, why_not))
                continue
            take(candidate, why)
            if filename.lower() in _IMPORTING_NAMES:
                importers.append(candidate)
    # Imports and required-reading links, followed a few hops (as Claude Code does).
    frontier = [(p, 0) for p in importers]
    while frontier:
        importer, depth = frontier.pop(0)
        for target, left_out in _imports(importer, base):
            rel_importer = importer.relative_to(base).as_posix()
            if left_out is not None:
                if not any(p == target for p, _ in found.skipped):
                    found.skipped.append((target, left_out))
                continue
            shown = target.relative_to(base).as_posix()
            if exclude and _matches(shown, exclude):
                continue
            if target in taken:
                continue
            taken_before = len(found.files)
            take(target, f"imported by {rel_importer}")
            if len(found.files) > taken_before:
                found.skipped[:] = [(p, r) for p, r in found.skipped if p != target]
                if depth + 1 < _MAX_IMPORT_DEPTH and target.suffix.lower() in _MARKDOWN_SUFFIXES:
                    frontier.append((target, depth + 1))
    return found


def discover_rule_files(root: Path, *, include_plain: bool = True) -> list[Path]:
    """Rule files under ``root`` (see :func:`discover`), in a stable order.

    Args:
        root: the folder to walk (a single file is returned as is).
        include_plain: also return markdown files no rule convention claims (READMEs, docs).

    Returns:
        Absolute paths of rule files.
    """
    return discover(root, take_plain=include_plain).files


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
