"""Validation of template documents: errors name the line and the field."""

from __future__ import annotations

from pathlib import Path

from parser_testkit import issues_for, template

from rules_parser import load, parse

VALID_META = (
    "**Layer:** 2-Application\n"
    "**AuthoritativeFor:** validation\n"
    "**Topics:** api, security\n"
    "**Severity:** MUST\n"
)
DIRECTIVES = "## Directives\n\n### [MUST] Validate input\n"


def test_each_missing_required_field_is_an_error_naming_the_field_at_the_title_line() -> None:
    text = "\n\n# Rule: Partial\n\n**Layer:** *\n**Topics:** api\n\n" + DIRECTIVES
    result = parse(text, "rules/partial.md")
    missing = {i.field: i for i in result.errors}
    assert set(missing) == {"AuthoritativeFor", "Severity"}
    for field, issue in missing.items():
        assert issue.line == 3
        assert issue.path == "rules/partial.md"
        assert field in issue.message
    # Still usable: the caller decides what to do with a document that has errors.
    assert result.document is not None
    assert [d.text for d in result.document.directives] == ["Validate input"]


def test_a_rule_title_without_any_metadata_reports_all_four_fields() -> None:
    result = parse("# Rule: Bare\n\n" + DIRECTIVES, "bare.md")
    assert sorted(i.field for i in result.errors) == [
        "AuthoritativeFor",
        "Layer",
        "Severity",
        "Topics",
    ]


def test_an_invalid_layer_names_the_value_the_allowed_values_and_a_suggestion() -> None:
    meta = VALID_META.replace("2-Application", "Aplication")
    result = parse(template(DIRECTIVES, meta=meta), "x.md")
    (issue,) = issues_for(result, "Layer")
    assert issue.severity == "error"
    assert issue.line == 3
    assert issue.column == 12
    assert "'Aplication'" in issue.message
    assert "1-Presentation" in issue.message and "7-Deployment" in issue.message
    assert "did you mean '2-Application'" in issue.message
    assert result.document is not None and result.document.layer is None


def test_an_invalid_severity_names_the_value_and_suggests_the_closest() -> None:
    meta = VALID_META.replace("**Severity:** MUST", "**Severity:** MUSTT")
    result = parse(template(DIRECTIVES, meta=meta), "x.md")
    (issue,) = issues_for(result, "Severity")
    assert issue.severity == "error"
    assert issue.line == 6
    assert "'MUSTT'" in issue.message and "MUST, SHOULD, MAY" in issue.message
    assert "did you mean 'MUST'" in issue.message


def test_layer_values_are_accepted_case_and_space_insensitively() -> None:
    meta = VALID_META.replace("2-Application", "2 - application")
    result = parse(template(DIRECTIVES, meta=meta), "x.md")
    assert result.errors == ()
    assert result.document is not None and result.document.layer == "2-Application"


def test_an_empty_topics_field_is_an_error() -> None:
    meta = VALID_META.replace("**Topics:** api, security", "**Topics:**")
    result = parse(template(DIRECTIVES, meta=meta), "x.md")
    (issue,) = issues_for(result, "Topics")
    assert (issue.severity, issue.line) == ("error", 5)


def test_an_unclosed_code_fence_is_an_error_at_its_opening_line() -> None:
    text = template("## Directives\n\n### [MUST] Validate input\n\n```python\nparse(body)\n")
    result = parse(text, "x.md")
    (issue,) = issues_for(result, "code_fence")
    assert issue.severity == "error"
    assert text.split("\n")[issue.line - 1] == "```python"


def test_an_unclosed_fence_inside_a_list_item_is_reported() -> None:
    text = template("## Directives\n\n- [MUST] Do it\n  ```sh\n  run\n- [MAY] Next\n")
    (issue,) = issues_for(parse(text, "x.md"), "code_fence")
    assert text.split("\n")[issue.line - 1] == "  ```sh"


def test_a_closed_fence_is_not_reported() -> None:
    text = template("## Directives\n\n### [MUST] A\n\n````md\n```\ninner\n```\n````\n")
    assert issues_for(parse(text, "x.md"), "code_fence") == []


def test_an_empty_directive_heading_is_an_error_and_is_skipped() -> None:
    text = template("## Directives\n\n### [MUST]\n\n### [SHOULD] Real one\n")
    result = parse(text, "x.md")
    (issue,) = issues_for(result, "directive")
    assert (issue.severity, issue.line) == ("error", 10)
    assert result.document is not None
    assert [d.text for d in result.document.directives] == ["Real one"]


def test_a_duplicated_directive_heading_is_a_warning_at_the_second_occurrence() -> None:
    text = template("## Directives\n\n### [MUST] Validate input\n\n### [MUST] validate input\n")
    result = parse(text, "x.md")
    (issue,) = issues_for(result, "directive")
    assert (issue.severity, issue.line) == ("warning", 12)
    assert "line 10" in issue.message
    keys = [d.directive_key for d in result.document.directives]  # type: ignore[union-attr]
    assert len(set(keys)) == 2


def test_a_directive_without_marker_gets_an_inferred_severity_and_a_warning() -> None:
    text = template("## Directives\n\n### Never log tokens\n\n### Keep it short\n")
    result = parse(text, "x.md")
    doc = result.document
    assert doc is not None
    first, second = doc.directives
    assert (first.severity, first.severity_source) == ("MUST", "inferred")
    # No wording cue: the document's Severity applies.
    assert (second.severity, second.severity_source) == ("MUST", "default")
    warnings = issues_for(result, "severity")
    assert [w.line for w in warnings] == [10, 12]
    assert all(w.severity == "warning" for w in warnings)


def test_an_invalid_directive_layer_override_is_an_error_at_its_line() -> None:
    text = template("## Directives\n\n### [MUST] A\n\n**Layer:** 9-Space\n")
    result = parse(text, "x.md")
    (issue,) = issues_for(result, "Layer")
    assert (issue.severity, issue.line) == ("error", 12)


def test_a_template_without_directives_gets_a_warning() -> None:
    result = parse(template("## Notes\n\nNothing here.\n"), "x.md")
    (issue,) = issues_for(result, "directives")
    assert issue.severity == "warning"


def test_issues_are_sorted_by_line() -> None:
    text = "# Rule: X\n\n**Layer:** nope\n\n" + DIRECTIVES + "\n```\nopen\n"
    lines = [i.line for i in parse(text, "x.md").issues]
    assert lines == sorted(lines)


def test_one_broken_document_does_not_stop_the_others(tmp_path: Path) -> None:
    good = tmp_path / "good.md"
    good.write_text(template(DIRECTIVES))
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"# Rule: Bad\n\xff\xfe broken bytes\n")
    missing = tmp_path / "missing.md"
    results = [load(p) for p in (bad, missing, good)]
    assert [r.document is None for r in results] == [True, True, False]
    assert results[0].errors[0].field == "encoding"
    assert results[0].errors[0].line == 2
    assert results[1].errors[0].field == "file"
    assert results[2].ok
