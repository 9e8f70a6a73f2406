"""rules_parser: markdown rule documents in, typed rules out.

Pure (no I/O) except ``rules_parser.loader``. Parses the seed-003 standard template (see
``docs/rule-format.md``) and the rule files coding tools already use (``AGENTS.md``,
``CLAUDE.md``, Cursor ``.mdc``, ``.clinerules``, Roo rules, Copilot instructions, plain
markdown) into ``RuleDocument`` values with ``Directive``s and ``ValidationIssue``s.

    >>> from rules_parser import parse
    >>> result = parse("# Rule: X\\n\\n**Layer:** *\\n...", "rules/x.md")
"""

from rules_parser.formats import detect_format
from rules_parser.inference import infer_layer, infer_severity, infer_topics, split_severity_marker
from rules_parser.loader import Discovery, discover, discover_rule_files, load
from rules_parser.models import (
    FORMATS,
    LAYERS,
    PARSER_VERSION,
    SEVERITIES,
    CodeExample,
    Directive,
    Format,
    ParseResult,
    RuleDocument,
    Section,
    Severity,
    SeveritySource,
    ValidationIssue,
)
from rules_parser.parse import parse
from rules_parser.secrets import SecretFinding, find_secrets, redact

__all__ = [
    "FORMATS",
    "LAYERS",
    "PARSER_VERSION",
    "SEVERITIES",
    "CodeExample",
    "Directive",
    "Discovery",
    "Format",
    "ParseResult",
    "RuleDocument",
    "SecretFinding",
    "Section",
    "Severity",
    "SeveritySource",
    "ValidationIssue",
    "detect_format",
    "discover",
    "discover_rule_files",
    "find_secrets",
    "infer_layer",
    "infer_severity",
    "infer_topics",
    "load",
    "parse",
    "redact",
    "split_severity_marker",
]
