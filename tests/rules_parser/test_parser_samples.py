"""Every shipped sample parses cleanly: the docs-kept-honest test for sample_rules/."""

from __future__ import annotations

from pathlib import Path

import pytest
from parser_testkit import FOREIGN, SAMPLES

from rules_parser import discover_rule_files, load

SAMPLE_FILES = discover_rule_files(SAMPLES)


def _rel(path: Path) -> str:
    return path.relative_to(SAMPLES.resolve()).as_posix()


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=_rel)
def test_every_sample_file_parses_without_errors(path: Path) -> None:
    result = load(path, display_path=_rel(path))
    assert result.document is not None
    assert result.errors == (), [str(i) for i in result.errors]
    assert result.document.directives, "a sample without directives teaches nothing"


def test_samples_cover_at_least_twelve_template_documents_with_rationale_and_examples() -> None:
    templates = [load(p).document for p in SAMPLE_FILES if not _rel(p).startswith("foreign/")]
    assert len(templates) >= 12
    for document in templates:
        assert document is not None
        assert document.format == "template"
        assert 4 <= len(document.directives) <= 8, document.path
        assert all(d.severity_source == "marker" for d in document.directives), document.path
        assert sum(d.rationale is not None for d in document.directives) >= 4, document.path
        assert document.patterns, document.path


def test_template_samples_use_every_layer_at_least_once() -> None:
    layers = {
        load(p).document.layer  # type: ignore[union-attr]
        for p in SAMPLE_FILES
        if not _rel(p).startswith("foreign/")
    }
    assert layers == {
        "1-Presentation",
        "2-Application",
        "3-Domain",
        "4-Persistence",
        "5-Tests",
        "6-Docs",
        "7-Deployment",
        "*",
    }


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("AGENTS.md", "agents_md"),
        ("CLAUDE.md", "claude_md"),
        (".cursor/rules/react.mdc", "cursor_mdc"),
        (".clinerules", "clinerules"),
        (".roo/rules/01-general.md", "roo_rules"),
        (".roo/rules-architect/01-design.md", "roo_rules"),
        (".github/copilot-instructions.md", "copilot_instructions"),
        (".github/instructions/python.instructions.md", "copilot_instructions"),
    ],
)
def test_each_foreign_sample_is_detected_as_its_format(relative: str, expected: str) -> None:
    result = load(FOREIGN / relative, display_path=relative)
    assert result.document is not None
    assert result.document.format == expected
