"""Tell a rule from the context around it: inventories, checklists, commands, file maps, prose.

Real rule files mix directives with material that helps an agent but is not an instruction:
PR-split plans ("PR 4: Add notification UI"), checklist boxes (``- [ ] Add tests``), tech-stack
inventories ("Auth: NextAuth.js"), file-location lists ("`src/app/` - routes"), command lists
("`pnpm dev` - start the server") and narrative or business-rule fragments under "Overview" or
"Domain". Ranked as directives they fill the budget with text that tells the agent nothing to
do; kept as the document's context, they stay available without competing with rules.

A statement with a severity marker, a cue word (must, never, always, should, avoid…) or a
leading instruction verb is always a directive, whatever its section.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from rules_parser.models import Directive

__all__ = ["NoiseKind", "merge_restatements", "noise_kind", "restatement_key"]

NoiseKind = Literal["checklist", "plan_step", "inventory", "file_location", "command", "narrative"]

_CHECKBOX_RE = re.compile(r"^\s*\[[ xX✓-]?\]\s*")
_PLAN_STEP_RE = re.compile(
    r"^\W*(?:PR|pull\s+request|commit|phase|milestone|sprint|iteration|ticket)\s*#?\s*\d+[a-z]?"
    r"\s*[:.)\-–—]",
    re.I,
)
_LABEL_VALUE_RE = re.compile(
    r"^\s*(?:\*\*|__)?(?P<label>[\w][\w .+/#&()-]{0,40}?)(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*"
    r"(?P<value>.+)$"
)
_CODE_LEAD_RE = re.compile(r"^\s*`(?P<code>[^`]+)`\s*(?:[-–—:=]|\s+to\s|\s*$)")
_PATH_RE = re.compile(r"^[\w.@~-]*(?:/[\w.@*\[\]{}()-]*)+/?$|^[\w.-]+\.[a-z0-9]{1,6}$", re.I)
_COMMAND_WORDS = frozenset(
    [
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "bun",
        "deno",
        "node",
        "make",
        "cargo",
        "go",
        "python",
        "python3",
        "pip",
        "uv",
        "poetry",
        "pytest",
        "tox",
        "nox",
        "docker",
        "docker-compose",
        "kubectl",
        "terraform",
        "git",
        "gh",
        "mvn",
        "gradle",
        "./gradlew",
        "dotnet",
        "bundle",
        "rails",
        "rake",
        "composer",
        "php",
        "artisan",
        "mix",
        "flutter",
        "dart",
        "swift",
        "xcodebuild",
        "ruff",
        "mypy",
        "eslint",
        "prettier",
        "tsc",
        "vitest",
        "jest",
        "playwright",
        "just",
        "task",
        "bash",
        "sh",
        "./scripts",
    ]
)
_INVENTORY_LABELS = frozenset(
    [
        "auth",
        "authentication",
        "authorization",
        "database",
        "db",
        "orm",
        "framework",
        "frameworks",
        "frontend",
        "backend",
        "styling",
        "styles",
        "css",
        "ui",
        "language",
        "languages",
        "runtime",
        "state",
        "state",
        "management",
        "hosting",
        "deployment",
        "deploy",
        "infra",
        "infrastructure",
        "ci",
        "cd",
        "ci/cd",
        "testing",
        "tests",
        "test",
        "framework",
        "package",
        "manager",
        "monorepo",
        "build",
        "tool",
        "bundler",
        "linter",
        "formatter",
        "api",
        "cache",
        "queue",
        "storage",
        "email",
        "payments",
        "analytics",
        "monitoring",
        "logging",
        "search",
        "validation",
        "forms",
        "icons",
        "charts",
        "i18n",
        "router",
        "routing",
        "server",
        "client",
        "mobile",
        "web",
        "cli",
        "version",
        "node",
        "python",
        "typescript",
        "react",
        "next.js",
    ]
)
_INVENTORY_HEADING_RE = re.compile(
    r"\b(?:tech(?:nology|nologies)?(?:\s+stack)?|stack|dependencies|libraries|tools|tooling|"
    r"toolchain|frameworks|versions|integrations)\b",
    re.I,
)
_FILES_HEADING_RE = re.compile(
    r"\b(?:structure|layout|directory|directories|folders?|files|file\s+locations?|"
    r"where\s+(?:things|to\s+find)|key\s+files|map|organi[sz]ation|modules)\b",
    re.I,
)
_COMMANDS_HEADING_RE = re.compile(
    r"\b(?:commands?|scripts?|setup|getting\s+started|quick\s*start|install(?:ation)?|"
    r"running|development\s+workflow|build\s+and\s+test|cli)\b",
    re.I,
)
_NARRATIVE_HEADING_RE = re.compile(
    r"\b(?:overview|about|introduction|background|summary|business\s+(?:rules?|logic|domain)|"
    r"domain(?:\s+model)?|glossary|terminology|how\s+it\s+works|purpose|architecture|history|"
    r"what\s+is)\b",
    re.I,
)
_PLAN_HEADING_RE = re.compile(
    r"\b(?:pr\s+(?:split|plan|breakdown|sequence)|roadmap|todo|to-do|milestones?|phases?|"
    r"implementation\s+plan|progress|changelog)\b",
    re.I,
)


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z][\w'’-]*", text)


_FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "for",
        "and",
        "or",
        "in",
        "on",
        "with",
        "by",
        "be",
        "is",
        "are",
        "always",
        "must",
        "should",
        "please",
        "you",
        "your",
        "we",
        "our",
        "it",
        "its",
        "this",
        "that",
        "all",
        "any",
        "every",
    ]
)


def restatement_key(text: str) -> frozenset[str]:
    """The content words of a statement (case, markup, filler and plural -s ignored)."""
    words = (w.lower().rstrip(".-").rstrip("s") for w in re.findall(r"[A-Za-z0-9][\w'’.-]*", text))
    return frozenset(w for w in words if w and w not in _FILLER)


def merge_restatements(directives: Sequence[Directive]) -> list[Directive]:
    """Drop directives that restate an earlier one of the same polarity.

    Two statements are one directive when their content words are the same, or one's are
    almost all (90%) the other's. The first keeps its place and gains the examples of the
    ones merged into it.
    """
    kept: list[Directive] = []
    keys: list[frozenset[str]] = []
    for directive in directives:
        key = restatement_key(directive.text)
        merged = False
        for index, other in enumerate(keys):
            if not key or not other or kept[index].polarity != directive.polarity:
                continue
            overlap = len(key & other) / min(len(key), len(other))
            if key == other or (overlap >= 0.9 and min(len(key), len(other)) >= 4):
                first = kept[index]
                kept[index] = first.model_copy(
                    update={"examples": (*first.examples, *directive.examples)}
                )
                merged = True
                break
        if not merged:
            kept.append(directive)
            keys.append(key)
    return kept


def noise_kind(
    statement: str,
    headings: Sequence[str],
    *,
    has_cue: bool,
    imperative: bool,
) -> NoiseKind | None:
    """What kind of context a list item or paragraph is, or None when it is a directive.

    Args:
        statement: the item's text (inline markdown kept).
        headings: its heading breadcrumb below the title, outermost first (only the deepest
            decides: a document titled "Project structure" may still hold rules).
        has_cue: the statement has a severity marker or cue word (must, never, avoid…):
            always a directive, except for checklist boxes and plan steps.
        imperative: it starts with an instruction verb ("Use …"): a directive unless it is a
            ``Label: value`` inventory line ("Test runner: Vitest").

    Returns:
        The kind of context, or None.
    """
    if _CHECKBOX_RE.match(statement):
        return "checklist"
    if _PLAN_STEP_RE.match(statement):
        return "plan_step"
    if has_cue:
        return None
    section = headings[-1] if headings else ""
    pair = _LABEL_VALUE_RE.match(statement)
    if pair is not None:
        label = pair.group("label").strip().lower()
        value_words = _words(pair.group("value"))
        if len(value_words) <= 8 and (
            all(w in _INVENTORY_LABELS for w in label.split())
            or _INVENTORY_HEADING_RE.search(section)
        ):
            return "inventory"
    if imperative:
        return None
    if _PLAN_HEADING_RE.search(section):
        return "plan_step"
    code = _CODE_LEAD_RE.match(statement)
    if code is not None:
        lead = code.group("code").strip()
        first = lead.split()[0] if lead.split() else ""
        if first.lower() in _COMMAND_WORDS or lead.startswith(("$ ", "./")):
            return "command"
        if _PATH_RE.match(lead):
            return "file_location"
    if _COMMANDS_HEADING_RE.search(section) and "`" in statement:
        return "command"
    plain = statement.strip("*_ ")
    first_token = plain.split(" ", 1)[0].strip("`*_:")
    if _PATH_RE.match(first_token) and "/" in first_token and _FILES_HEADING_RE.search(section):
        return "file_location"
    if _INVENTORY_HEADING_RE.search(section) and len(_words(statement)) <= 8:
        return "inventory"
    if _FILES_HEADING_RE.search(section) and "`" in statement and len(_words(statement)) <= 14:
        return "file_location"
    if _NARRATIVE_HEADING_RE.search(section):
        return "narrative"
    return None
