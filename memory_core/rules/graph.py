"""Turn a parsed rule document into a write plan for the knowledge graph (pure).

One document becomes: a ``resource`` row (kind ``rule_document``), one ``item`` per directive
(kind ``directive``: the lexical and vector indexes come with it), and the entities and edges
of the graph: rule, sections, topics, layers, severities, When-to-Apply conditions, code
patterns and technologies, linked by AuthoritativeFor, Layer, Topic, Severity, WhenToApply,
Related, HasSection, HasDirective, Contains and HasPattern edges (seed 003, Requirement 1.2).

Directive uids derive from scope, path, directive key and content, so an unchanged directive
keeps its id (and its vector) across re-ingests and a changed one is replaced.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from memory_core.kinds import ItemKind, ResourceKind
from memory_core.models import EMBED_TEXT_KEY, NewItem, content_hash, stable_id
from memory_core.rules.topics import TopicNormalizer
from memory_core.scope import Scope
from memory_core.tokens import TokenCounter
from rules_parser import Directive, RuleDocument, infer_layer
from rules_parser.polarity import directive_marker
from rules_parser.vocabulary import FRAMEWORK_KEYWORDS, LANGUAGE_KEYWORDS, PLATFORM_KEYWORDS

__all__ = [
    "DIRECTIVE_KIND",
    "INDEX_VERSION",
    "RULE_DOCUMENT_KIND",
    "DirectivePlan",
    "DocumentPlan",
    "build_plan",
    "condition_key",
    "directive_line",
    "embed_text",
    "rule_key",
]

RULE_DOCUMENT_KIND: ResourceKind = "rule_document"
DIRECTIVE_KIND: ItemKind = "directive"
_EMBED_DETAIL_CHARS = 400
# How directives are indexed (what is embedded, see embed_text). A stored document indexed
# by another version is planned again on re-ingest, like one parsed by another parser version.
# 3: the embedded text is recorded on each directive (metadata EMBED_TEXT_KEY) for `reembed`.
INDEX_VERSION = 3
_TECH_LOOKUP: dict[str, tuple[str, str]] = {}
for _category, _vocab in (
    ("language", LANGUAGE_KEYWORDS),
    ("framework", FRAMEWORK_KEYWORDS),
    ("platform", PLATFORM_KEYWORDS),
):
    for _name, _keywords in _vocab.items():
        for _keyword in (_name, *_keywords):
            _TECH_LOOKUP.setdefault(_keyword, (_name, _category))


def rule_key(name: str) -> str:
    """The stable rule id: the rule name casefolded with words joined by ``-``."""
    key = re.sub(r"[\s_.]+", "-", name.strip().casefold())
    key = re.sub(r"[^\w-]+", "", key).strip("-")
    return key or stable_id(name, length=12)


def condition_key(text: str) -> str:
    """Identity of a When-to-Apply condition: casefolded, whitespace collapsed."""
    return re.sub(r"\s+", " ", text.casefold()).strip()[:300]


_CONTEXT_LINES = 60


def directive_line(severity: str, text: str, polarity: str = "do") -> str:
    """The compact rendered form of a directive (what the token count is stored for)."""
    return f"- **{directive_marker(severity, polarity, text)}** {text}"


@dataclass(frozen=True)
class DirectivePlan:
    """One directive to store, with its graph edges by name."""

    item: NewItem
    embed_text: str
    severity: str
    layer: str  # "" when unknown
    topics: tuple[str, ...]
    when_to_apply: tuple[str, ...]
    section_key: str
    patterns: tuple[tuple[str, str], ...]  # (pattern key, display name)


@dataclass(frozen=True)
class DocumentPlan:
    """Everything an upsert of one document writes."""

    scope: Scope
    uri: str
    content_hash: str
    rule_id: str
    rule_name: str
    resource_metadata: dict[str, Any]
    sections: tuple[tuple[str, str, int], ...]  # (section key, display path, line)
    directives: tuple[DirectivePlan, ...]
    technologies: dict[str, str] = field(default_factory=dict)
    pattern_count: int = 0


def _section_key(uri: str, path: tuple[str, ...]) -> str:
    return uri + "#" + "/".join(path)


def _technologies(document: RuleDocument) -> dict[str, str]:
    found: dict[str, str] = {}
    words = [document.title or "", *document.topics, *document.authoritative_for]
    words += [p.language or "" for p in document.patterns]
    for word in words:
        for token in re.findall(r"[\w#.+-]+", word.casefold()):
            hit = _TECH_LOOKUP.get(token)
            if hit:
                found[hit[0]] = hit[1]
    return found


def _heading(directive: Directive) -> str:
    """The nearest heading above the directive ("" when it sits under the title alone).

    A template directive is a heading itself (the last entry of its section path), so its
    heading is the one above; a bullet or sentence of a foreign file sits under the last one.
    """
    path = directive.section_path
    text = directive.text.casefold().strip()
    if path and text and text in path[-1].casefold():
        path = path[:-1]
    return path[-1] if len(path) > 1 else ""


def embed_text(document: RuleDocument, directive: Directive) -> str:
    """What a directive's vector is made of: "rule title. nearest heading. statement. detail".

    The title and heading say what the rule is about ("AGENTS.md. Security. Never commit
    secrets"); a heading equal to the title, or the template's "Directives", adds nothing.
    """
    title = document.title or document.rule_name
    leaf = _heading(directive)
    parts = [title]
    if leaf and leaf.casefold() not in ("directives", "rules", title.casefold()):
        parts.append(leaf)
    parts.append(directive.text)
    extra = " ".join(x for x in (directive.detail, directive.rationale) if x)
    if extra:
        parts.append(extra[:_EMBED_DETAIL_CHARS])
    return ". ".join(parts)


def _index_text(directive: Directive) -> str:
    parts = [directive.text]
    parts += [x for x in (directive.detail, directive.rationale) if x]
    parts += list(directive.anti_patterns)
    return "\n".join(parts)


def _effective_layer(document: RuleDocument, directive: Directive) -> str:
    if directive.layer:
        return directive.layer
    if document.layer:
        return document.layer
    if document.always_apply:
        return "*"  # e.g. Cursor alwaysApply: the author said it applies everywhere
    # Foreign formats declare no layer: infer one from the wording, else leave it unknown
    # (unknown is not the wildcard: "*" earns LayerMatch for every task, which a guess must not).
    return infer_layer(" ".join((*directive.section_path[1:], directive.text))) or ""


def build_plan(
    document: RuleDocument,
    *,
    scope: Scope,
    uri: str,
    tokens: TokenCounter,
    topics: TopicNormalizer,
) -> DocumentPlan:
    """Build the write plan for ``document`` stored at ``uri`` in ``scope``.

    Args:
        document: the parsed document.
        scope: the scope it goes to.
        uri: the path recorded for citations (relative to its root).
        tokens: counts each directive's rendered line once, at ingest.
        topics: normalises topic names against the scope's known topics.

    Returns:
        The plan (no I/O happened).
    """
    rid = rule_key(document.rule_name)
    doc_topics = topics.normalize_all(document.topics)
    authoritative = topics.normalize_all(document.authoritative_for)
    doc_conditions = tuple(c for c in document.when_to_apply if c.strip())
    sections = tuple(
        (_section_key(uri, s.path), " > ".join(s.path), s.line) for s in document.sections
    )
    section_keys = {s[0] for s in sections}
    lines = tokens.count_many(
        [directive_line(d.severity, d.text, d.polarity) for d in document.directives]
    )
    plans: list[DirectivePlan] = []
    for directive, line_tokens in zip(document.directives, lines, strict=True):
        layer = _effective_layer(document, directive)
        d_topics = topics.normalize_all(directive.topics or document.topics)
        conditions = tuple(c for c in directive.when_to_apply if c.strip())
        section_path = directive.section_path
        # The deepest heading that is a section (template directives are headings themselves).
        section_key = _section_key(uri, section_path)
        if section_key not in section_keys and len(section_path) > 1:
            section_key = _section_key(uri, section_path[:-1])
        patterns = tuple(
            (content_hash(f"{p.language}\n{p.code}")[:24], (p.language or "text") + " example")
            for p in directive.examples
        )
        metadata = {
            "rule_id": rid,
            "directive_key": directive.directive_key,
            "statement": directive.text,
            "severity": directive.severity,
            "severity_source": directive.severity_source,
            "polarity": directive.polarity,
            "layer": layer,
            "topics": list(d_topics),
            "when_to_apply": list(conditions),
            "section_path": list(section_path),
            "rationale": directive.rationale,
            "detail": directive.detail,
            "anti_patterns": list(directive.anti_patterns),
            "examples": [
                {"language": e.language, "code": e.code, "anti_pattern": e.is_anti_pattern}
                for e in directive.examples
            ],
        }
        embedded = embed_text(document, directive)
        # Recorded so that `reembed` and a restore under another embedder embed this text, not
        # the item text (memory_core.models.embedding_text), and give the vector ingest gives.
        metadata[EMBED_TEXT_KEY] = embedded
        # What is embedded is part of the identity: a directive embedded another way gets a
        # new uid, so a re-ingest embeds it again instead of keeping the old vector.
        digest = content_hash(json.dumps(metadata, sort_keys=True, ensure_ascii=False))
        tags = [s for s in section_path if s.casefold() not in ("directives", "rules")]
        tags += list(d_topics) + list(conditions)
        item = NewItem(
            uid=stable_id("directive", scope, uri, directive.directive_key, digest),
            kind=DIRECTIVE_KIND,
            text=_index_text(directive),
            token_count=line_tokens,
            scope=scope,
            content_hash=digest,
            start_line=directive.line_start,
            end_line=directive.line_end,
            importance={"MUST": 1.0, "SHOULD": 0.66, "MAY": 0.33}[directive.severity],
            tags=tuple(dict.fromkeys(tags)),
            metadata=metadata,
        )
        plans.append(
            DirectivePlan(
                item=item,
                embed_text=embedded,
                severity=directive.severity,
                layer=layer,
                topics=d_topics,
                when_to_apply=conditions,
                section_key=section_key if section_key in section_keys else "",
                patterns=patterns,
            )
        )
    resource_metadata = {
        "rule_id": rid,
        "rule_name": document.rule_name,
        "title": document.title,
        "format": document.format,
        "layer": document.layer,
        "topics": list(doc_topics),
        "authoritative_for": list(authoritative),
        "default_severity": document.default_severity,
        "when_to_apply": list(doc_conditions),
        "related_rules": [rule_key(r) for r in document.related_rules if rule_key(r)],
        "globs": list(document.globs),
        "always_apply": document.always_apply,
        "description": document.description,
        "mode": document.mode,
        # A store re-parses a document another parser version wrote, even if its text is same.
        "parser_version": document.parser_version,
        # ... and one indexed (embedded) another way: see INDEX_VERSION.
        "index_version": INDEX_VERSION,
        # Inventories, command and file lists, plans, narrative: shown with the rule, not ranked.
        "context": list(document.context[:_CONTEXT_LINES]),
    }
    return DocumentPlan(
        scope=scope,
        uri=uri,
        content_hash=document.content_hash,
        rule_id=rid,
        rule_name=document.rule_name,
        resource_metadata=resource_metadata,
        sections=sections,
        directives=tuple(plans),
        technologies=_technologies(document),
        pattern_count=len(document.patterns),
    )
