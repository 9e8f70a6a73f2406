"""The standard template: every field is extracted, in every accepted spelling."""

from __future__ import annotations

import json
import os

from parser_testkit import GOLDEN, SAMPLES, template

from rules_parser import load, parse


def test_golden_sample_parses_to_the_recorded_structure() -> None:
    # Regenerate after an intended change with UPDATE_GOLDEN=1, then review the diff.
    result = load(
        SAMPLES / "api-input-validation.md", display_path="sample_rules/api-input-validation.md"
    )
    actual = result.model_dump(mode="json")
    golden = GOLDEN / "api-input-validation.json"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
    assert actual == json.loads(golden.read_text())


def test_metadata_when_to_apply_related_rules_and_directive_parts_are_extracted() -> None:
    text = template(
        "Intro paragraph for the rule.\n\n"
        "## When to Apply\n- Adding an endpoint\n- Accepting uploads\n\n"
        "## Directives\n\n"
        "### [MUST] Validate input\n"
        "Parse it first.\n\n"
        "**Rationale:** Injection bugs.\n\n"
        "More reasons.\n\n"
        "```python\nmodel.parse(body)\n```\n\n"
        "**Anti-pattern:** Reading the raw dict.\n"
        "```js\nreq.body.x\n```\n\n"
        "**Topics:** validation, input\n\n"
        "**Layer:** 1-Presentation\n\n"
        "### [MAY] Log rejected payload sizes\n\n"
        "## Related Rules\n- security-secrets\n- [Error Handling](error-handling.md)\n"
    )
    result = parse(text, "rules/test.md")
    assert result.errors == ()
    doc = result.document
    assert doc is not None
    assert doc.format == "template"
    assert doc.title == "Test Rule"
    assert doc.rule_name == "test"
    assert doc.layer == "2-Application"
    assert doc.authoritative_for == ("validation",)
    assert doc.topics == ("api", "security")
    assert doc.default_severity == "MUST"
    assert doc.when_to_apply == ("Adding an endpoint", "Accepting uploads")
    assert doc.related_rules == ("security-secrets", "error-handling")
    assert doc.description == "Intro paragraph for the rule."
    first, second = doc.directives
    assert first.text == "Validate input"
    assert (first.severity, first.severity_source) == ("MUST", "marker")
    assert first.section_path == ("Test Rule", "Directives", "Validate input")
    assert first.detail == "Parse it first."
    assert first.rationale == "Injection bugs.\n\nMore reasons."
    assert [(e.language, e.is_anti_pattern) for e in first.examples] == [
        ("python", False),
        ("js", True),
    ]
    assert first.examples[0].code == "model.parse(body)\n"
    assert first.anti_patterns == ("Reading the raw dict.",)
    assert first.topics == ("validation", "input")
    assert first.layer == "1-Presentation"
    assert first.directive_key == "directives/validate-input#1"
    assert (second.severity, second.text) == ("MAY", "Log rejected payload sizes")
    assert len(doc.patterns) == 2
    lines = text.split("\n")
    assert lines[first.line_start - 1] == "### [MUST] Validate input"
    assert lines[first.line_end - 1] == "**Layer:** 1-Presentation"


def test_front_matter_metadata_with_block_and_flow_lists_is_read() -> None:
    text = (
        "---\n"
        "Layer: 4-Persistence\n"
        "authoritativeFor: [migrations, 'schema']\n"
        "TOPICS:\n  - database\n  - migrations\n"
        "severity: should\n"
        "name: DB Migrations\n"
        "---\n"
        "# Migrations\n\n## Directives\n\n### [MUST] Never edit an applied migration\n"
    )
    result = parse(text, "x.md")
    doc = result.document
    assert result.errors == ()
    assert doc is not None and doc.format == "template"
    assert doc.layer == "4-Persistence"
    assert doc.authoritative_for == ("migrations", "schema")
    assert doc.topics == ("database", "migrations")
    assert doc.default_severity == "SHOULD"
    assert doc.rule_name == "db-migrations"
    assert doc.directives[0].line_start == 14  # front matter lines count


def test_bullet_metadata_with_nested_topics_and_case_insensitive_keys() -> None:
    text = (
        "# Rule: Logging\n\n"
        "- layer: *\n- Authoritative For: logging\n- topics:\n  - logging\n  - tracing\n"
        "- SEVERITY: may\n\n"
        "## Directives\n\n### [SHOULD] Log events, not prose\n"
    )
    result = parse(text, "logging.md")
    doc = result.document
    assert result.errors == ()
    assert doc is not None
    assert (doc.layer, doc.authoritative_for, doc.topics, doc.default_severity) == (
        "*",
        ("logging",),
        ("logging", "tracing"),
        "MAY",
    )


def test_bullet_directives_in_a_directives_section_are_read_with_their_markers() -> None:
    text = template(
        "## Directives\n\n- [MUST] Use bound parameters\n  - even for ids\n- Prefer joins\n"
    )
    result = parse(text, "x.md")
    doc = result.document
    assert doc is not None
    first, second = doc.directives
    assert (first.text, first.severity, first.detail) == (
        "Use bound parameters",
        "MUST",
        "- even for ids",
    )
    assert (second.text, second.severity, second.severity_source) == (
        "Prefer joins",
        "SHOULD",
        "inferred",
    )


def test_sub_headings_inside_a_directive_act_as_labels() -> None:
    text = template(
        "## Directives\n\n### [MUST] Pin base images\n\n#### Rationale\nReproducible builds.\n\n"
        "#### Bad\n```dockerfile\nFROM python:latest\n```\n"
    )
    doc = parse(text, "x.md").document
    assert doc is not None
    (directive,) = doc.directives
    assert directive.rationale == "Reproducible builds."
    assert [(e.language, e.is_anti_pattern) for e in directive.examples] == [("dockerfile", True)]


def test_a_marker_heading_outside_a_directives_section_is_still_a_directive() -> None:
    doc = parse(template("## Security\n\n### [MUST] Rotate keys\n"), "x.md").document
    assert doc is not None
    assert [d.text for d in doc.directives] == ["Rotate keys"]
    assert doc.directives[0].section_path == ("Test Rule", "Security", "Rotate keys")


def test_code_fence_languages_and_content_are_kept_verbatim() -> None:
    code = "def f(x):\n\n    return x  # keep\n\t\n"
    text = template(
        f"## Directives\n\n### [MAY] Example\n\n~~~python {{.numberLines}}\n{code}~~~\n"
    )
    doc = parse(text, "x.md").document
    assert doc is not None
    assert doc.directives[0].examples[0].code == code
    assert doc.directives[0].examples[0].language == "python"


def test_content_hash_is_the_sha256_of_the_text_as_given() -> None:
    import hashlib

    text = template("## Directives\n\n### [MUST] A rule\r\n")
    doc = parse(text, "x.md").document
    assert doc is not None
    assert doc.content_hash == hashlib.sha256(text.encode()).hexdigest()


def test_crlf_text_gives_the_same_lines_as_lf_text() -> None:
    text = template("## Directives\n\n### [MUST] A rule\nBody.\n")
    lf = parse(text, "x.md").document
    crlf = parse(text.replace("\n", "\r\n"), "x.md").document
    assert lf is not None and crlf is not None
    assert lf.directives == crlf.directives
