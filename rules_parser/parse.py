"""The parser's entry point: ``parse(text, path)`` -> ``ParseResult``.

Pure: no file access, no logging of document text. Never raises on any text; problems become
``ValidationIssue``s so one bad document never stops a batch.
"""

from __future__ import annotations

import hashlib

from rules_parser.blocks import parse_blocks
from rules_parser.foreign import parse_foreign
from rules_parser.formats import detect_format
from rules_parser.frontmatter import split_front_matter
from rules_parser.issues import IssueSink
from rules_parser.models import FORMATS, Format, ParseResult
from rules_parser.secrets import find_secrets
from rules_parser.structure import DocContext, iter_fences, segments_of
from rules_parser.template import parse_template

__all__ = ["parse"]


def parse(text: str, path: str, *, format: Format | None = None) -> ParseResult:
    """Parse one rule document.

    Args:
        text: the document's text (any line endings).
        path: its path, as it should be cited; also used to detect the format.
        format: force a format instead of detecting it.

    Returns:
        The parsed document and every issue found (errors and warnings, sorted by line).
        ``document`` is None only when the text is empty.

    Raises:
        ValueError: ``format`` is not one of the supported formats (a caller bug, not a
            document problem).
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown rule format {format!r}; expected one of: {', '.join(FORMATS)}")
    issues = IssueSink(path)
    content_hash = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    normalized = text.replace("\r\n", "\n").replace("\r", "\n")
    if not normalized.strip():
        issues.warning(1, "document is empty", field="document")
        return ParseResult(document=None, issues=issues.sorted())
    lines = normalized.split("\n")
    fmt: Format = format or detect_format(path, normalized)

    front_matter = split_front_matter(lines)
    body_lines = list(lines)
    if front_matter is not None:
        # Blank the front matter instead of cutting it, so markdown-it's line numbers stay
        # the file's line numbers.
        for index in range(front_matter.line_end):
            body_lines[index] = ""
        for line, content in front_matter.unreadable:
            issues.warning(
                line, f"front matter line not understood: {content[:60]!r}", field="front_matter"
            )

    blocks = parse_blocks("\n".join(body_lines))
    for fence in iter_fences(blocks):
        if not fence.closed:
            issues.error(
                fence.line_start,
                "code fence opened here is never closed; add a closing ``` line",
                field="code_fence",
            )
    ctx = DocContext(
        path=path,
        lines=lines,
        segments=segments_of(blocks),
        front_matter=front_matter,
        content_hash=content_hash,
    )
    document = parse_template(ctx, issues) if fmt == "template" else parse_foreign(ctx, fmt, issues)
    for finding in find_secrets(normalized):
        issues.warning(
            finding.line,
            f"possible real secret ({finding.kind.replace('_', ' ')}); remove it or replace it "
            "with a placeholder such as YOUR_API_KEY",
            field="secret",
            column=finding.column,
        )
    return ParseResult(document=document, issues=issues.sorted())
