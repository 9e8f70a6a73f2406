"""Parse the rule files coding tools already use into directives.

``AGENTS.md``, ``CLAUDE.md``, Cursor ``.mdc``, ``.clinerules``, Roo rules, Copilot
instructions and plain markdown have no fixed structure. Here a directive is a list item
(its child items and code blocks belong to it) or a short standalone rule paragraph (one that
carries a severity cue or starts with an imperative verb). The heading breadcrumb is its
section; severity, topics and layer are inferred from the wording and the headings. A list
item that ends with ``:`` and has children is a label: its children are the directives.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from rules_parser.blocks import Block, BlockQuote, Fence, ListBlock, ListItem, Other, Paragraph
from rules_parser.directive_body import label_kind
from rules_parser.formats import roo_mode, rule_name_from_path, slugify
from rules_parser.frontmatter import FrontMatter
from rules_parser.inference import infer_layer, infer_severity, infer_topics, split_severity_marker
from rules_parser.issues import IssueSink
from rules_parser.metadata import MetaValue
from rules_parser.models import CodeExample, Directive, Format, RuleDocument, Severity
from rules_parser.noise import merge_restatements, noise_kind
from rules_parser.polarity import (
    heading_polarity,
    is_label_heading,
    resolve_polarity,
    text_polarity,
)
from rules_parser.structure import (
    DocContext,
    clean_inline,
    directive_key,
    fence_example,
    item_statement,
    iter_fences,
    metadata_key,
    render_blocks,
    sections_of,
)
from rules_parser.template import normalize_layer

__all__ = ["IMPERATIVE_VERBS", "is_rule_paragraph", "parse_foreign"]

# First words that make a short paragraph read as an instruction.
IMPERATIVE_VERBS = frozenset(
    [
        "add",
        "adopt",
        "allow",
        "apply",
        "ask",
        "avoid",
        "build",
        "call",
        "check",
        "choose",
        "commit",
        "configure",
        "create",
        "declare",
        "default",
        "define",
        "delete",
        "document",
        "do",
        "don't",
        "dont",
        "ensure",
        "enable",
        "escape",
        "export",
        "favor",
        "favour",
        "follow",
        "format",
        "handle",
        "import",
        "include",
        "inject",
        "isolate",
        "memoize",
        "load",
        "cache",
        "defer",
        "batch",
        "fetch",
        "guard",
        "hoist",
        "pass",
        "prefix",
        "provide",
        "leave",
        "let",
        "consider",
        "stop",
        "refer",
        "see",
        "emit",
        "expose",
        "group",
        "lazy-load",
        "keep",
        "limit",
        "lint",
        "log",
        "make",
        "mark",
        "minimize",
        "mock",
        "move",
        "name",
        "never",
        "always",
        "only",
        "pin",
        "place",
        "prefer",
        "prevent",
        "put",
        "raise",
        "read",
        "record",
        "reject",
        "remove",
        "rename",
        "replace",
        "require",
        "reset",
        "restrict",
        "return",
        "reuse",
        "review",
        "run",
        "sanitize",
        "sanitise",
        "separate",
        "set",
        "split",
        "store",
        "test",
        "treat",
        "update",
        "upgrade",
        "use",
        "validate",
        "verify",
        "wrap",
        "write",
        "open",
        "wire",
        "strive",
        "regenerate",
        "mention",
        "describe",
        "explain",
        "stick",
        "rely",
        "aim",
        "register",
        "annotate",
        "type",
        "assert",
        "clean",
        "bump",
        "install",
        "generate",
        "implement",
        "extend",
        "override",
        "throw",
        "catch",
        "await",
        "close",
        "release",
        "dispose",
        "comment",
        "preserve",
        "respect",
        "match",
        "mirror",
        "extract",
        "inline",
        "skip",
        "start",
        "end",
        "send",
        "schedule",
        "resolve",
        "reproduce",
        "stub",
        "sign",
        "hash",
        "encrypt",
        "redact",
        "authenticate",
        "authorize",
        "look",
        "target",
        "bundle",
        "upload",
        "download",
        "measure",
        "profile",
        "benchmark",
        "attach",
        "link",
        "cite",
        "communicate",
        "discuss",
        "notify",
        "report",
    ]
)
_CODE_SPAN_RE = re.compile(r"`[^`]*`")
_ALWAYS_APPLY_FORMATS: frozenset[Format] = frozenset(
    {"agents_md", "claude_md", "clinerules", "roo_rules", "copilot_instructions", "plain_markdown"}
)


def _is_trivial(text: str) -> bool:
    without_code = _CODE_SPAN_RE.sub(" ", text)
    words = [w for w in without_code.split() if any(c.isalpha() for c in w)]
    has_code = without_code != text
    # "`make`" alone or "ok" alone says nothing; "Build: `npm run build`" does.
    return not words or (len(words) < 2 and not has_code)


def starts_imperative(text: str) -> bool:
    """True when a statement starts with an instruction verb ("Use …", "**Run** …")."""
    first = re.sub(r"^[^\w']+", "", text).split(" ", 1)[0].lower().strip("*_:,.`")
    return first.replace("\u2019", "'") in IMPERATIVE_VERBS


# "Please run …", and a leading condition before the instruction: "When X changes, run …".
_PLEASE_RE = re.compile(r"^\W*please\s+", re.I)
_LEAD_CLAUSE_RE = re.compile(
    r"^\W*(?:when(?:ever)?|if|for|before|after|unless|once|while|during|in|on|to)\b"
    r"(?:\([^)]*\)|[^,:;(]){1,120}[,:]\s+",
    re.I,
)
# "`bun run compile` — NOT `bun run build`": a shouted NOT is a cue even in a command list.
_SHOUTED_NOT_RE = re.compile(r"\bNOT\b")
_RULE_NUMBER_RE = re.compile(r"^\W*rule\s*#?\d+[a-z]?\s*[:.)\-–—]\s*", re.I)
# A sentence ends at . ! ? (and any closing quote, bracket or emphasis) before a capital.
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])[\"')\]*_]*\s+(?=[\"'(\[*_`]*[A-Z0-9])")
_ABBREVIATION_RE = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|Dr|Mr|Ms|No)\.$", re.I)


def reads_as_rule(text: str) -> bool:
    """True when a statement reads as an instruction, whatever its length.

    A severity marker, an instruction verb first ("Use …", "Please run …", "When X, run …")
    or a strong cue word (must, never, always, do not, should, avoid…) makes a rule.

    Args:
        text: a sentence, table cell, heading or list label (inline markdown kept).

    Returns:
        Whether it reads as a rule.
    """
    flat = clean_inline(text).rstrip(":").strip()
    if _is_trivial(flat):
        return False
    marker, rest = split_severity_marker(flat)
    if marker is not None:
        return True
    core = _PLEASE_RE.sub("", rest)
    if starts_imperative(core):
        return True
    clause = _LEAD_CLAUSE_RE.match(core)
    if clause is not None and starts_imperative(_PLEASE_RE.sub("", core[clause.end() :])):
        return True
    severity, source = infer_severity(flat)
    return source == "inferred" and severity != "MAY"


def split_sentences(text: str, first_line: int) -> list[tuple[str, int, int]]:
    """A paragraph's sentences with the source lines each spans.

    Args:
        text: the paragraph's inline text, one source line per ``\\n``.
        first_line: the 1-based line of its first line.

    Returns:
        (sentence, line_start, line_end) in order; code spans never split a sentence.
    """
    masked = _CODE_SPAN_RE.sub(lambda m: "x" * len(m.group()), text)
    cuts = [0]
    for match in _SENTENCE_END_RE.finditer(masked):
        if not _ABBREVIATION_RE.search(masked[: match.start()]):
            cuts.append(match.end())
    cuts.append(len(text))
    out = []
    for start, end in itertools.pairwise(cuts):
        piece = text[start:end]
        if not piece.strip():
            continue
        lead = len(piece) - len(piece.lstrip())
        line_start = first_line + text[: start + lead].count("\n")
        line_end = first_line + text[: start + len(piece.rstrip())].count("\n")
        out.append((clean_inline(piece), line_start, line_end))
    return out


def split_table_row(line: str) -> list[str]:
    """A markdown table row's cells (pipes inside code spans or escaped do not split)."""
    cells: list[str] = []
    current: list[str] = []
    in_code = False
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    previous = ""
    for char in body:
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code and previous != "\\":
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        previous = char
    cells.append("".join(current).strip())
    return cells


def is_rule_heading(title: str) -> bool:
    """True for a heading that is itself a rule ("Rule 2: DDL must be idempotent").

    A heading that is only a polarity label ("Never do", "Things to avoid") is not: it gives
    its polarity to the items under it.
    """
    numbered = _RULE_NUMBER_RE.match(title) is not None
    text = _RULE_NUMBER_RE.sub("", title).rstrip(":").strip()
    if len(text.split()) < 3 or is_label_heading(text):
        return False
    if numbered:
        return True
    marker, _ = split_severity_marker(text)
    severity, source = infer_severity(text)
    return marker is not None or (source == "inferred" and severity == "MUST")


def _short_label(text: str) -> bool:
    """ "Incorrect (why it is slow):" is a label; a sentence that ends in a colon is not."""
    return ". " not in text and len(text.split()) <= 8


def is_rule_paragraph(text: str) -> bool:
    """True for a short paragraph that reads as a rule (cue word or imperative start).

    Args:
        text: a paragraph's inline text.

    Returns:
        Whether the paragraph should become a directive.
    """
    flat = clean_inline(text)
    if len(flat) > 400 or flat.endswith(":") or _is_trivial(flat):
        return False
    if flat.count(". ") > 3:  # long explanatory prose, not a rule
        return False
    marker, rest = split_severity_marker(flat)
    if marker is not None:
        return True
    first = re.sub(r"^[*_`\s]+", "", rest).split(" ", 1)[0].lower().strip("*_:,.")
    if first.replace("\u2019", "'") in IMPERATIVE_VERBS:
        return True
    # Only strong cues count for prose: "may"/"can" appear in plain descriptions too.
    severity, source = infer_severity(flat)
    return source == "inferred" and severity != "MAY"


class _Collector:
    def __init__(self, ctx: DocContext, key_offset: int) -> None:
        self.ctx = ctx
        self.key_offset = key_offset
        self.directives: list[Directive] = []
        self.patterns: list[CodeExample] = []
        self.counters: dict[str, int] = {}
        # Labels in force that are not headings: a "Never:" paragraph before a list.
        self.labels: tuple[str, ...] = ()
        self.context: list[str] = []
        self.default_severity: Severity | None = None

    def add(
        self,
        statement: str,
        path: tuple[str, ...],
        line_start: int,
        line_end: int,
        rest: tuple[Block, ...] = (),
        extra: str | None = None,
    ) -> None:
        severity, source = infer_severity(statement)
        _, text = split_severity_marker(statement)
        labels = (*path[self.key_offset :], *self.labels)
        imperative = starts_imperative(text)
        kind = noise_kind(
            text,
            path[self.key_offset :],
            has_cue=source != "default"
            or text_polarity(text) is not None
            or _SHOUTED_NOT_RE.search(text) is not None,
            imperative=imperative,
        )
        if kind is not None and not self.labels:
            # Context, not a directive: kept on the document, never ranked.
            self.context.append(f"{kind}: {text}")
            return
        polarity, heading_severity = resolve_polarity(text, labels, imperative=imperative)
        if source == "default" and self.default_severity is not None:
            severity = self.default_severity
        elif source == "default" and heading_severity is not None:
            severity, source = heading_severity, "inferred"
        elif source == "default" and polarity != "do":
            severity, source = "MUST", "inferred"  # "No `any` types", "❌ …"
        detail = "\n".join(filter(None, (render_blocks(rest), extra))) or None
        examples = [fence_example(f, anti=False) for f in iter_fences(rest)]
        headings = " ".join(path[self.key_offset :])
        topics = infer_topics(f"{headings}\n{text}\n{detail or ''}", limit=4)
        layer = infer_layer(f"{headings}\n{text}")
        key_path = path[self.key_offset :] if len(path) > self.key_offset else path
        self.directives.append(
            Directive(
                directive_key=directive_key(key_path, self.counters),
                text=text,
                severity=severity,
                severity_source=source,
                polarity=polarity,
                section_path=path,
                detail=detail,
                examples=tuple(examples),
                topics=topics,
                layer=layer,
                line_start=line_start,
                line_end=line_end,
            )
        )
        self.patterns.extend(examples)

    def attach(self, fence: Fence, anti: bool) -> None:
        example = fence_example(fence, anti=anti)
        self.patterns.append(example)
        last = self.directives[-1]
        self.directives[-1] = last.model_copy(
            update={
                "examples": (*last.examples, example),
                "line_end": max(last.line_end, fence.line_end),
            }
        )

    def walk(self, blocks: Sequence[Block], path: tuple[str, ...]) -> None:
        previous_produced = False
        anti = False
        pending_label: str | None = None
        for block in blocks:
            before = len(self.directives)
            if isinstance(block, ListBlock):
                saved = self.labels
                if pending_label is not None:
                    self.labels = (*saved, pending_label)
                for item in block.items:
                    self._item(item, path)
                self.labels = saved
                pending_label = None
            elif isinstance(block, Paragraph):
                flat = clean_inline(block.text)
                core = flat.strip("*_ ")  # "**Incorrect (why):**" is a label too
                words = core.split(maxsplit=1)
                kind = label_kind(core.rstrip(":")) if core.endswith(":") and words else None
                keeps_link = kind is not None
                if kind is None and core.endswith(":") and words and _short_label(core):
                    kind = label_kind(words[0].rstrip(":"))
                # "Never do the following:" before a list gives the list its polarity.
                pending_label = (
                    flat.rstrip(":")
                    if flat.endswith(":")
                    and _short_label(core)
                    and heading_polarity(flat.rstrip(":")) is not None
                    else None
                )
                if kind in ("example", "anti"):
                    # "Bad:" / "Incorrect (why):" before a code block marks it as an
                    # anti-pattern; the block still illustrates the directive just before.
                    anti = kind == "anti"
                    if not keeps_link:  # "Example of a data hook:" is prose, not a label
                        previous_produced = False
                    continue
                if pending_label is None:
                    self._paragraph(block, flat, path)
            elif isinstance(block, Fence):
                # Only a block right under a directive illustrates it; after intervening prose
                # the link is a guess, so the code is kept as a document pattern only.
                if previous_produced:
                    self.attach(block, anti=anti)
                else:
                    self.patterns.append(fence_example(block, anti=anti))
                anti = False
                continue
            elif isinstance(block, BlockQuote):
                self.walk(block.blocks, path)
            elif isinstance(block, Other) and block.kind == "table":
                self._table(block, path)
            previous_produced = len(self.directives) > before

    def _paragraph(self, block: Paragraph, flat: str, path: tuple[str, ...]) -> None:
        """A rule paragraph is one directive; in prose, each rule sentence is one, with the
        sentences after it (up to the next rule sentence) as its detail."""
        single = flat.count(". ") == 0 and len(flat) <= 400
        if is_rule_paragraph(flat) or (single and flat.endswith(":") and reads_as_rule(flat)):
            # "When using the client, you must apply the settings:" before a list or code.
            self.add(flat, path, block.line_start, block.line_end)
            return
        groups: list[list[tuple[str, int, int]]] = []
        for sentence, start, end in split_sentences(block.text, block.line_start):
            if reads_as_rule(sentence):
                groups.append([(sentence, start, end)])
            elif groups:
                groups[-1].append((sentence, start, end))
        for group in groups:
            extra = " ".join(s for s, _, _ in group[1:]) or None
            self.add(group[0][0], path, group[0][1], group[-1][2], extra=extra)

    def _table(self, block: Other, path: tuple[str, ...]) -> None:
        """Rows of a table whose column holds rules ("Do not … | Do instead") are directives;
        the other cells, with their headers, are the detail."""
        rows = [split_table_row(line) for line in block.text.split("\n")]
        if len(rows) < 3:
            return
        header, body = rows[0], rows[2:]
        counts = [
            sum(1 for r in body if c < len(r) and reads_as_rule(r[c])) for c in range(len(header))
        ]
        best = max(range(len(counts)), key=lambda c: (counts[c], -c)) if counts else 0
        if not counts or counts[best] * 2 < len(body):
            return  # an inventory or a reference table: context
        saved = self.labels
        name = header[best].strip("*_ ")
        if heading_polarity(name) is not None:
            self.labels = (*saved, name)  # a "Don't" column
        for offset, row in enumerate(body):
            if best >= len(row) or not reads_as_rule(row[best]):
                continue
            extra = "; ".join(
                f"{header[c]}: {cell}" if c < len(header) and header[c] else cell
                for c, cell in enumerate(row)
                if c != best and cell
            )
            line = block.line_start + 2 + offset
            self.add(row[best], path, line, line, extra=extra or None)
        self.labels = saved

    def _item(self, item: ListItem, path: tuple[str, ...]) -> None:
        statement, rest = item_statement(item)
        nested = [b for b in rest if isinstance(b, ListBlock)]
        if statement.endswith(":") and nested:
            label = statement.rstrip(":").strip("*_ ").strip()
            if (heading_polarity(label) is None or not is_label_heading(label)) and reads_as_rule(
                label
            ):
                # "Avoid fixed sleeps in tests. Instead:" is a rule of its own; its items
                # stay directives too.
                first = item.blocks[0].line_end if item.blocks else item.line_start
                self.add(statement, path, item.line_start, first, rest)
            self.walk(rest, (*path, label) if label else path)
            return
        if (
            nested
            and heading_polarity(statement.rstrip(":")) is not None
            and is_label_heading(statement)
        ):
            # "- 🚫 Never" with sub-items: a label without a colon.
            self.walk(rest, (*path, statement.strip("*_ ")))
            return
        if not statement or _is_trivial(statement):
            self.walk(nested, path)
            return
        self.add(statement, path, item.line_start, item.line_end, rest)


_IMPACT_SEVERITY: dict[str, Severity] = {
    "critical": "MUST",
    "high": "MUST",
    "medium": "SHOULD",
    "medium-high": "SHOULD",
    "low-medium": "MAY",
    "low": "MAY",
}


def _impact_severity(fm: FrontMatter | None) -> Severity | None:
    # Rule folders often grade rules with front matter "impact: CRITICAL|HIGH|MEDIUM|LOW".
    if fm is None:
        return None
    for raw_key, value in fm.values.items():
        if raw_key.strip().lower() == "impact" and isinstance(value, str):
            return _IMPACT_SEVERITY.get(value.strip().lower())
    return None


def _front_value(fm: FrontMatter | None, key: str) -> MetaValue | None:
    if fm is None:
        return None
    for raw_key, value in fm.values.items():
        if metadata_key(raw_key) == key:
            return MetaValue(raw_key, value, fm.lines.get(raw_key, 1), None)
    return None


def parse_foreign(ctx: DocContext, fmt: Format, issues: IssueSink) -> RuleDocument:
    """Parse a tool's rule file (or plain markdown) into a document of inferred directives.

    Args:
        ctx: the document being parsed.
        fmt: its format (any but ``template``).
        issues: where problems are recorded.

    Returns:
        The document.
    """
    fm = ctx.front_matter
    title_segment = next((s for s in ctx.segments if s.level == 1), None)
    collector = _Collector(ctx, key_offset=1 if title_segment is not None else 0)
    collector.default_severity = _impact_severity(fm)
    for segment in ctx.segments:
        heading = segment.heading
        if heading is not None and is_rule_heading(segment.title):
            # "### Rule 2: DDL must be idempotent": the heading is the rule, the paragraphs
            # right under it its detail (its own items stay directives).
            lead = tuple(itertools.takewhile(lambda b: isinstance(b, Paragraph), segment.blocks))
            text = _RULE_NUMBER_RE.sub("", segment.title).strip()
            collector.add(text, segment.path[:-1], heading.line_start, heading.line_end, lead)
        collector.walk(segment.blocks, segment.path)

    description_value = _front_value(fm, "description")
    description = description_value.as_text() or None if description_value else None
    globs_value = _front_value(fm, "globs")
    globs = tuple(g for g in (globs_value.as_list() if globs_value else []) if g)
    always_value = _front_value(fm, "always_apply")
    if always_value is not None and isinstance(always_value.value, bool):
        always_apply = always_value.value
    elif fmt == "cursor_mdc":
        always_apply = False
    else:
        always_apply = fmt in _ALWAYS_APPLY_FORMATS and (not globs or globs == ("**",))

    layer: str | None = None
    layer_value = _front_value(fm, "layer")
    if layer_value is not None and layer_value.as_text():
        layer = normalize_layer(layer_value.as_text())
        if layer is None:
            issues.warning(
                layer_value.line,
                f"unknown layer '{layer_value.as_text()[:60]}' ignored",
                field="Layer",
            )
    if layer is None:
        hint = " ".join(
            filter(None, [title_segment.title if title_segment else "", description or ""])
        )
        hint += " " + re.sub(r"[^\w]+", " ", " ".join(globs))
        layer = infer_layer(hint) or "*"

    topics_value = _front_value(fm, "topics")
    if topics_value is not None and topics_value.as_list():
        topics = tuple(dict.fromkeys(topics_value.as_list()))
    else:
        counts: dict[str, int] = {}
        for directive in collector.directives:
            for topic in directive.topics:
                counts[topic] = counts.get(topic, 0) + 1
        topics = tuple(t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:6])

    title = title_segment.title if title_segment else None
    if title is None:
        title_value = _front_value(fm, "title")
        title = (title_value.as_text() or None) if title_value else None
    name_value = _front_value(fm, "rule_name")
    rule_name = (slugify(name_value.as_text()) if name_value else "") or rule_name_from_path(
        ctx.path
    )
    return RuleDocument(
        path=ctx.path,
        format=fmt,
        title=title,
        rule_name=rule_name or slugify(title or "") or fmt.replace("_", "-"),
        layer=layer,
        topics=topics,
        default_severity="SHOULD",
        when_to_apply=(description,) if description and not always_apply else (),
        related_rules=(),
        globs=globs,
        always_apply=always_apply,
        description=description,
        mode=roo_mode(ctx.path) if fmt == "roo_rules" else None,
        directives=tuple(merge_restatements(collector.directives)),
        context=tuple(collector.context),
        sections=sections_of(ctx.segments),
        patterns=tuple(collector.patterns),
        content_hash=ctx.content_hash,
    )
