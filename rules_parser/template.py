"""Parse and validate documents in the seed-003 standard template.

See ``docs/rule-format.md`` for the format. In short: a ``# Rule: …`` title, metadata
(Layer, AuthoritativeFor, Topics, Severity), a ``## When to Apply`` list, a ``## Directives``
section whose ``###`` headings (``### [MUST] …``) are directives, and ``## Related Rules``.
Any heading carrying a severity marker is a directive too, wherever it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rules_parser.blocks import Block, ListBlock, Paragraph
from rules_parser.directive_body import Body, read_body
from rules_parser.formats import rule_name_from_path, slugify
from rules_parser.inference import infer_severity, infer_topics, split_severity_marker
from rules_parser.issues import IssueSink, did_you_mean
from rules_parser.metadata import (
    Metadata,
    MetaValue,
    collect_metadata,
    is_metadata_heading,
    text_of,
)
from rules_parser.models import LAYERS, SEVERITIES, CodeExample, Directive, RuleDocument, Severity
from rules_parser.polarity import resolve_polarity
from rules_parser.structure import (
    DocContext,
    Segment,
    block_span,
    clean_inline,
    directive_key,
    item_statement,
    iter_fences,
    sections_of,
)

__all__ = ["REQUIRED_FIELDS", "normalize_layer", "parse_template"]

# (canonical key, the name used in messages: the template's own spelling)
REQUIRED_FIELDS: tuple[tuple[str, str], ...] = (
    ("layer", "Layer"),
    ("authoritative_for", "AuthoritativeFor"),
    ("topics", "Topics"),
    ("severity", "Severity"),
)
_FIELD_NAMES = dict(REQUIRED_FIELDS)
_CONTAINER_TITLES = ("rules", "guidelines", "standards", "requirements")
_LINK_RE = re.compile(r"^\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]*)[^)]*\)$")


def _title_kind(title: str) -> str | None:
    lowered = title.strip().lower().rstrip(":")
    if lowered.startswith("directive") or lowered in _CONTAINER_TITLES:
        return "container"
    if lowered in ("when to apply", "when to use", "applies when", "applicability", "scope"):
        return "when"
    if lowered in ("related rules", "related", "see also", "related rule"):
        return "related"
    if is_metadata_heading(lowered):
        return "metadata"
    return None


def normalize_layer(value: str) -> str | None:
    """The canonical layer for a spelling (``2-application``, ``2 - Application``), else None."""
    squashed = re.sub(r"\s+", "", value).strip("`\"'")
    if squashed != "*":  # the wildcard layer is also markdown's emphasis character
        squashed = squashed.strip("*_")
    squashed = squashed.lower()
    for layer in LAYERS:
        if squashed == layer.lower():
            return layer
    return None


def _normalize_severity(value: str) -> Severity | None:
    upper = value.strip().strip("`*_[]\"'").upper()
    return next((s for s in SEVERITIES if s == upper), None)


def _line_list(blocks: list[Block]) -> list[str]:
    items: list[str] = []
    for block in blocks:
        if isinstance(block, ListBlock):
            items.extend(s for s in (item_statement(i)[0] for i in block.items) if s)
        elif isinstance(block, Paragraph):
            items.extend(clean_inline(line) for line in block.text.split("\n") if line.strip())
    return items


def _related_name(item: str) -> str:
    text = item.strip().strip("`")
    link = _LINK_RE.match(text)
    if link:
        target = link.group("target")
        text = (
            rule_name_from_path(target) if target.endswith((".md", ".mdc")) else link.group("text")
        )
    return slugify(text.split(" - ")[0].split(": ")[0].strip("` "))


@dataclass
class _Pending:
    """A directive found but not finished: its statement, origin and body blocks."""

    statement: str
    marker: Severity | None
    path: tuple[str, ...]
    line_start: int
    line_end: int
    body: list[Block]


def _validate_metadata(
    meta: Metadata, issues: IssueSink, title_line: int
) -> tuple[str | None, Severity, list[str], list[str]]:
    for key, name in REQUIRED_FIELDS:
        value = meta.values.get(key)
        if value is None:
            issues.error(
                title_line,
                f"missing required metadata field '{name}'; add a line such as "
                f"'**{name}:** …' under the title or '{name[0].lower()}{name[1:]}: …' in front matter",
                field=name,
            )
        elif not value.as_text():
            issues.error(value.line, f"metadata field '{name}' is empty", field=name)
    for key, dup in meta.duplicates:
        issues.warning(
            dup.line,
            f"metadata field '{dup.raw_key}' is given again; the first value is used",
            field=_FIELD_NAMES.get(key, key),
        )
    layer: str | None = None
    raw_layer = meta.values.get("layer")
    if raw_layer is not None and raw_layer.as_text():
        layer = _check_layer(raw_layer, issues, "Layer")
    severity: Severity = "SHOULD"
    raw_sev = meta.values.get("severity")
    if raw_sev is not None and raw_sev.as_text():
        normalized = _normalize_severity(raw_sev.as_text())
        if normalized is None:
            shown = raw_sev.as_text()[:60]
            guess = did_you_mean(shown, SEVERITIES)
            issues.error(
                raw_sev.line,
                f"invalid Severity '{shown}'; allowed: {', '.join(SEVERITIES)}"
                + (f" (did you mean '{guess}'?)" if guess else ""),
                field="Severity",
                column=raw_sev.column,
            )
        else:
            severity = normalized
    topics = _list_of(meta.values.get("topics"))
    authoritative = _list_of(meta.values.get("authoritative_for"))
    return layer, severity, topics, authoritative


def _check_layer(value: MetaValue, issues: IssueSink, field: str) -> str | None:
    normalized = normalize_layer(value.as_text())
    if normalized is None:
        shown = value.as_text()[:60]
        guess = did_you_mean(shown, LAYERS)
        issues.error(
            value.line,
            f"invalid {field} '{shown}'; allowed: {', '.join(LAYERS)}"
            + (f" (did you mean '{guess}'?)" if guess else ""),
            field=field,
            column=value.column,
        )
    return normalized


def _list_of(value: MetaValue | None) -> list[str]:
    return value.as_list() if value is not None else []


def _collect_directives(
    segments: list[Segment], meta: Metadata
) -> tuple[list[_Pending], list[str], list[str], str | None, list[CodeExample]]:
    pending: list[_Pending] = []
    when: list[str] = []
    related: list[str] = []
    description: str | None = None
    loose_fences: list[CodeExample] = []
    container_level: int | None = None
    current: _Pending | None = None
    for segment in segments:
        heading = segment.heading
        level = segment.level
        if heading is not None:
            if current is not None and level > len(current.path):
                # A deeper heading inside a directive: a label (Rationale, Example…).
                current.body.append(heading)
                current.body.extend(segment.blocks)
                continue
            current = None
            if container_level is not None and level <= container_level:
                container_level = None
            kind = _title_kind(segment.title)
            marker, statement = split_severity_marker(heading.text)
            if marker is not None or (container_level is not None and level == container_level + 1):
                current = _Pending(
                    clean_inline(statement),
                    marker,
                    segment.path,
                    heading.line_start,
                    heading.line_end,
                    list(segment.blocks),
                )
                pending.append(current)
                continue
            if kind == "container":
                container_level = level
                pending.extend(_bullet_directives(segment))
                continue
            if kind == "when":
                when.extend(_line_list(segment.blocks))
                continue
            if kind == "related":
                related.extend(_related_name(i) for i in _line_list(segment.blocks))
                continue
            if kind == "metadata":
                continue
            if description is None and segment.title.lower() in (
                "overview",
                "purpose",
                "description",
                "summary",
            ):
                description = next(
                    (clean_inline(b.text) for b in segment.blocks if isinstance(b, Paragraph)), None
                )
        if level <= 1 and description is None:
            description = next(
                (
                    clean_inline(b.text)
                    for b in segment.blocks
                    if isinstance(b, Paragraph)
                    and b.line_start not in meta.lines
                    and not any(line in meta.lines for line in range(b.line_start, b.line_end + 1))
                ),
                None,
            )
        loose_fences.extend(
            CodeExample(
                language=f.language, code=f.code, is_anti_pattern=False, line_start=f.line_start
            )
            for f in iter_fences(segment.blocks)
        )
    return pending, when, related, description, loose_fences


def _bullet_directives(segment: Segment) -> list[_Pending]:
    found: list[_Pending] = []
    for block in segment.blocks:
        if not isinstance(block, ListBlock):
            continue
        for item in block.items:
            statement, rest = item_statement(item)
            marker, text = split_severity_marker(statement)
            found.append(
                _Pending(text, marker, segment.path, item.line_start, item.line_end, list(rest))
            )
    return found


def parse_template(ctx: DocContext, issues: IssueSink) -> RuleDocument:
    """Parse a template document, validating its metadata and directives.

    Args:
        ctx: the document being parsed.
        issues: where validation problems are recorded (with line and field).

    Returns:
        The document, with whatever could be parsed even when there were errors.
    """
    segments = ctx.segments
    meta = collect_metadata(segments, ctx.front_matter, ctx.lines)
    title_heading = next((s for s in segments if s.level == 1), None)
    title = title_heading.title if title_heading else text_of(meta.values.get("title"))
    title_line = title_heading.heading.line_start if title_heading and title_heading.heading else 1
    layer, default_severity, topics, authoritative = _validate_metadata(meta, issues, title_line)
    pending, when, related, description, loose = _collect_directives(segments, meta)
    when.extend(_list_of(meta.values.get("when_to_apply")))
    related.extend(slugify(r) for r in _list_of(meta.values.get("related_rules")))

    directives: list[Directive] = []
    patterns: list[CodeExample] = []
    counters: dict[str, int] = {}
    seen: dict[str, int] = {}
    key_offset = 1 if title_heading is not None else 0
    for item in pending:
        body = read_body(item.body)
        span = block_span(item.body)
        line_end = max(item.line_end, span[1]) if span else item.line_end
        if not item.statement:
            issues.error(
                item.line_start,
                "directive has no statement after its severity marker",
                field="directive",
            )
            continue
        normalized = item.statement.lower()
        if normalized in seen:
            issues.warning(
                item.line_start,
                f"duplicated directive '{item.statement[:60]}' (first at line {seen[normalized]})",
                field="directive",
            )
        else:
            seen[normalized] = item.line_start
        directive = _build_directive(
            item, body, line_end, default_severity, topics, issues, counters, key_offset
        )
        directives.append(directive)
        patterns.extend(directive.examples)
    if not directives:
        issues.warning(
            title_line,
            "no directives found; add a '## Directives' section with '### [MUST] …' headings",
            field="directives",
        )
    known = {(p.line_start, p.code) for p in patterns}
    patterns.extend(p for p in loose if (p.line_start, p.code) not in known)
    patterns.sort(key=lambda p: p.line_start or 0)
    rule_name = slugify(text_of(meta.values.get("rule_name")) or "") or rule_name_from_path(
        ctx.path
    )
    return RuleDocument(
        path=ctx.path,
        format="template",
        title=title,
        rule_name=rule_name or slugify(title or "") or "rule",
        layer=layer,
        authoritative_for=tuple(dict.fromkeys(authoritative)),
        topics=tuple(dict.fromkeys(topics)),
        default_severity=default_severity,
        when_to_apply=tuple(dict.fromkeys(w for w in when if w)),
        related_rules=tuple(dict.fromkeys(r for r in related if r)),
        globs=tuple(_list_of(meta.values.get("globs"))),
        always_apply=meta.values["always_apply"].value is True
        if "always_apply" in meta.values
        else False,
        description=text_of(meta.values.get("description")) or description,
        directives=tuple(directives),
        sections=sections_of(segments),
        patterns=tuple(patterns),
        content_hash=ctx.content_hash,
    )


def _build_directive(
    item: _Pending,
    body: Body,
    line_end: int,
    default_severity: Severity,
    doc_topics: list[str],
    issues: IssueSink,
    counters: dict[str, int],
    key_offset: int,
) -> Directive:
    if item.marker is not None:
        severity, source = item.marker, "marker"
    else:
        # The statement decides; the description may carry the cue ("Do not …").
        severity, source = infer_severity(f"{item.statement}\n{' '.join(body.detail[:1])}")
        if source == "default":
            severity = default_severity
        issues.warning(
            item.line_start,
            f"directive has no severity marker; using {severity} "
            + ("inferred from its wording" if source == "inferred" else "(the document's Severity)")
            + f"; write '[{severity}] …' to make it explicit",
            field="severity",
        )
    layer: str | None = None
    if body.layer is not None:
        value, line = body.layer
        layer = _check_layer(MetaValue("Layer", value, line, None), issues, "Layer")
    detail = "\n\n".join(d for d in body.detail if d) or None
    if body.topics:
        topics = tuple(dict.fromkeys(body.topics))
    else:
        inferred = infer_topics(f"{item.statement}\n{detail or ''}", limit=3)
        topics = tuple(dict.fromkeys([*doc_topics, *inferred]))
    key_path = item.path[key_offset:] if len(item.path) > key_offset else item.path
    headings = [h for h in item.path[key_offset:] if h.strip() != item.statement.strip()]
    polarity, heading_severity = resolve_polarity(item.statement, headings)
    if source == "default" and heading_severity is not None:
        severity = heading_severity
    return Directive(
        directive_key=directive_key(key_path, counters),
        text=item.statement,
        severity=severity,
        severity_source=source,  # type: ignore[arg-type]
        polarity=polarity,
        section_path=item.path,
        detail=detail,
        rationale="\n\n".join(body.rationale) or None,
        examples=tuple(body.examples),
        anti_patterns=tuple(body.anti_patterns),
        topics=topics,
        layer=layer,
        when_to_apply=tuple(body.when_to_apply),
        line_start=item.line_start,
        line_end=line_end,
    )
