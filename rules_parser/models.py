"""Typed values the parser produces: rule documents, directives, issues.

Every model is a frozen pydantic model, so parse results can be shared, hashed into caches and
compared in tests without defensive copies. Line numbers are 1-based and inclusive, into the
source text exactly as given (front matter included).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "FORMATS",
    "LAYERS",
    "PARSER_VERSION",
    "SEVERITIES",
    "CodeExample",
    "Directive",
    "Format",
    "IssueSeverity",
    "Layer",
    "ParseResult",
    "Polarity",
    "RuleDocument",
    "Section",
    "Severity",
    "SeveritySource",
    "ValidationIssue",
]

Severity = Literal["MUST", "SHOULD", "MAY"]
# do: an instruction; dont: a prohibition (rendered MUST NOT / Never, never as an
# instruction); ask: something to ask the user about before doing it.
Polarity = Literal["do", "dont", "ask"]
SeveritySource = Literal["marker", "inferred", "default"]
Layer = Literal[
    "1-Presentation",
    "2-Application",
    "3-Domain",
    "4-Persistence",
    "5-Tests",
    "6-Docs",
    "7-Deployment",
    "*",
]
Format = Literal[
    "template",
    "agents_md",
    "claude_md",
    "cursor_mdc",
    "clinerules",
    "roo_rules",
    "copilot_instructions",
    "plain_markdown",
]
IssueSeverity = Literal["error", "warning"]

SEVERITIES: tuple[Severity, ...] = ("MUST", "SHOULD", "MAY")
LAYERS: tuple[Layer, ...] = (
    "1-Presentation",
    "2-Application",
    "3-Domain",
    "4-Persistence",
    "5-Tests",
    "6-Docs",
    "7-Deployment",
    "*",
)
FORMATS: tuple[Format, ...] = (
    "template",
    "agents_md",
    "claude_md",
    "cursor_mdc",
    "clinerules",
    "roo_rules",
    "copilot_instructions",
    "plain_markdown",
)

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# Bump whenever a change to the parser changes what a file parses into (directives, polarity,
# context, line spans): stores re-parse documents that an older version parsed, even when
# their text is unchanged.
PARSER_VERSION = "2026.11.26"


class CodeExample(BaseModel):
    """A fenced code block, kept verbatim with its fence language.

    Attributes:
        language: the first word of the fence info string (``python``), or None.
        code: the code exactly as written, without the fences.
        is_anti_pattern: True when the block illustrates what not to do.
        line_start: 1-based line of the opening fence.
    """

    model_config = _FROZEN

    language: str | None
    code: str
    is_anti_pattern: bool
    line_start: int | None = None


class Section(BaseModel):
    """A heading and where it sits: its breadcrumb from the top of the document."""

    model_config = _FROZEN

    path: tuple[str, ...]
    level: int
    line: int


class Directive(BaseModel):
    """One rule statement an agent should follow.

    Attributes:
        directive_key: stable within the document: slug of the section path (without the
            document title) plus ``#n``, the directive's 1-based index within that section.
        text: the statement itself (inline markdown kept, severity marker removed).
        severity: MUST, SHOULD or MAY.
        severity_source: ``marker`` ([MUST]), ``inferred`` (from wording) or ``default``.
        polarity: ``do``, ``dont`` (a prohibition, from its wording or its heading) or
            ``ask`` (ask the user first).
        section_path: heading breadcrumb, title included.
        detail: description paragraphs and child bullets, if any.
        rationale: why the directive exists, if stated.
        examples: code blocks attached to the directive (anti-patterns flagged).
        anti_patterns: prose descriptions of what not to do.
        topics: explicit topics, else the document's plus those inferred from the text.
        layer: an override of the document's layer, or None to inherit it.
        when_to_apply: directive-specific conditions (the document's are on the document).
        line_start: first source line of the directive (1-based).
        line_end: last source line of the directive (inclusive).
    """

    model_config = _FROZEN

    directive_key: str
    text: str
    severity: Severity
    severity_source: SeveritySource
    polarity: Polarity = "do"
    section_path: tuple[str, ...]
    detail: str | None = None
    rationale: str | None = None
    examples: tuple[CodeExample, ...] = ()
    anti_patterns: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    layer: str | None = None
    when_to_apply: tuple[str, ...] = ()
    line_start: int
    line_end: int


class RuleDocument(BaseModel):
    """A parsed rule document, whatever format it came in.

    Attributes:
        path: the path as the caller gave it (used for citations).
        format: the detected (or forced) source format.
        title: the first H1 (``Rule:`` prefix removed), else the front matter title, else None.
        rule_name: a stable id-like name: explicit ``Name`` metadata, else the file name.
        layer: one of the seven layers or ``*``; None when a template omits or misspells it.
        authoritative_for: topics this rule is the authority on.
        topics: the document's topics (declared, else inferred).
        default_severity: severity for directives that carry no marker and no wording cue.
        when_to_apply: conditions under which the rule applies.
        related_rules: names of related rules.
        globs: file globs the rule applies to (Cursor ``globs``, Copilot ``applyTo``).
        always_apply: Cursor ``alwaysApply``; True for formats that always apply.
        description: front matter or metadata description, if any.
        mode: the Roo mode for ``.roo/rules-{mode}/`` files, else None.
        directives: the extracted directives in source order.
        context: lines that inform but instruct nothing (tech-stack inventories, command and
            file lists, checklist boxes, PR plans, narrative), each prefixed with its kind;
            kept with the rule, never ranked as directives.
        sections: every heading with its breadcrumb and line.
        patterns: every code block in the document (examples and anti-patterns).
        content_hash: sha256 hex of the text exactly as given.
        parser_version: the ``PARSER_VERSION`` that produced this document.
    """

    model_config = _FROZEN

    path: str
    format: Format
    title: str | None
    rule_name: str
    layer: str | None
    authoritative_for: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    default_severity: Severity = "SHOULD"
    when_to_apply: tuple[str, ...] = ()
    related_rules: tuple[str, ...] = ()
    globs: tuple[str, ...] = ()
    always_apply: bool = False
    description: str | None = None
    mode: str | None = None
    directives: tuple[Directive, ...] = ()
    context: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()
    patterns: tuple[CodeExample, ...] = ()
    content_hash: str
    parser_version: str = PARSER_VERSION


class ValidationIssue(BaseModel):
    """A problem found in a document, located by line (1-based) and field when known."""

    model_config = _FROZEN

    path: str
    line: int
    column: int | None = None
    field: str | None = None
    message: str
    severity: IssueSeverity

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" + (f":{self.column}" if self.column else "")
        field = f" [{self.field}]" if self.field else ""
        return f"{where}: {self.severity}{field}: {self.message}"


class ParseResult(BaseModel):
    """What ``parse`` and ``load`` return: the document (None if nothing usable) and issues."""

    model_config = _FROZEN

    document: RuleDocument | None
    issues: tuple[ValidationIssue, ...] = ()

    @property
    def errors(self) -> tuple[ValidationIssue, ...]:
        """The issues of severity ``error``."""
        return tuple(i for i in self.issues if i.severity == "error")

    @property
    def warnings(self) -> tuple[ValidationIssue, ...]:
        """The issues of severity ``warning``."""
        return tuple(i for i in self.issues if i.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when a document was produced and no issue is an error."""
        return self.document is not None and not self.errors
