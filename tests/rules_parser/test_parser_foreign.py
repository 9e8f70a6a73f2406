"""Tool rule files: detection, front matter, and directive extraction from free markdown."""

from __future__ import annotations

import pytest
from parser_testkit import FOREIGN

from rules_parser import detect_format, load, parse


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        ("AGENTS.md", "", "agents_md"),
        ("sub/dir/agents.md", "", "agents_md"),
        ("CLAUDE.md", "", "claude_md"),
        ("CLAUDE.local.md", "", "claude_md"),
        (".cursor/rules/react.mdc", "", "cursor_mdc"),
        ("anything.mdc", "", "cursor_mdc"),
        (".clinerules", "", "clinerules"),
        (".clinerules/01-style.md", "", "clinerules"),
        (".roo/rules/a.md", "", "roo_rules"),
        (".roo/rules-code/a.txt", "", "roo_rules"),
        (".roorules", "", "roo_rules"),
        (".github/copilot-instructions.md", "", "copilot_instructions"),
        (".github/instructions/py.instructions.md", "", "copilot_instructions"),
        ("C:\\repo\\.github\\copilot-instructions.md", "", "copilot_instructions"),
        ("docs/rules/api.md", "# Rule: API\n", "template"),
        ("docs/rules/api.md", "**Layer:** 2-Application\n", "template"),
        ("docs/rules/api.md", "---\ntopics: [a]\n---\n", "template"),
        ("README.md", "# Project\n\n- Use tabs\n", "plain_markdown"),
        # The path wins: a tool finds its files by name whatever they contain.
        ("AGENTS.md", "# Rule: X\n**Layer:** *\n", "agents_md"),
    ],
)
def test_detect_format(path: str, text: str, expected: str) -> None:
    assert detect_format(path, text) == expected


def test_cursor_mdc_front_matter_gives_description_globs_and_always_apply() -> None:
    result = load(FOREIGN / ".cursor/rules/react.mdc", display_path=".cursor/rules/react.mdc")
    doc = result.document
    assert doc is not None
    assert doc.description is not None and doc.description.startswith("React component")
    assert doc.globs == ("web/src/**/*.tsx", "web/src/**/*.ts")
    assert doc.always_apply is False
    assert doc.when_to_apply == (doc.description,)
    assert doc.layer == "1-Presentation"  # inferred from the title, description and globs
    assert doc.rule_name == "react"
    # The example right under "Prefer Tailwind" is a pattern, not that directive's example,
    # because prose sits between them.
    tailwind = next(d for d in doc.directives if "Tailwind" in d.text)
    assert tailwind.examples == ()
    assert [p.language for p in doc.patterns] == ["tsx"]


def test_mdc_without_front_matter_and_always_apply_true() -> None:
    text = "---\nalwaysApply: true\nglobs:\n---\n- Never use var\n"
    doc = parse(text, ".cursor/rules/js.mdc").document
    assert doc is not None
    assert (doc.always_apply, doc.globs) == (True, ())
    assert [d.text for d in doc.directives] == ["Never use var"]


def test_copilot_instructions_apply_to_becomes_globs() -> None:
    relative = ".github/instructions/python.instructions.md"
    doc = load(FOREIGN / relative, display_path=relative).document
    assert doc is not None
    assert doc.format == "copilot_instructions"
    assert doc.globs == ("**/*.py",)
    assert doc.always_apply is False
    assert doc.rule_name == "python"


def test_roo_mode_folder_is_recorded() -> None:
    architect = ".roo/rules-architect/01-design.md"
    general = ".roo/rules/01-general.md"
    assert load(FOREIGN / architect, display_path=architect).document.mode == "architect"  # type: ignore[union-attr]
    assert load(FOREIGN / general, display_path=general).document.mode is None  # type: ignore[union-attr]


def test_agents_md_bullets_become_directives_with_sections_and_inferred_severity() -> None:
    doc = load(FOREIGN / "AGENTS.md", display_path="AGENTS.md").document
    assert doc is not None
    by_text = {d.text: d for d in doc.directives}
    never = by_text[next(t for t in by_text if t.startswith("Never commit secrets"))]
    assert (never.severity, never.severity_source) == ("MUST", "inferred")
    assert never.section_path == ("AGENTS.md", "Security")
    assert "security" in never.topics
    avoid = by_text[next(t for t in by_text if t.startswith("Avoid `time.sleep`"))]
    assert (avoid.severity, avoid.severity_source) == ("SHOULD", "inferred")
    title = by_text["Title format: `[area] short imperative summary`."]
    assert (title.severity, title.severity_source) == ("SHOULD", "default")
    # The fence directly under the "Always validate" bullet list belongs to its last item.
    validate = by_text[next(t for t in by_text if t.startswith("Always validate"))]
    assert [e.language for e in validate.examples] == ["python"]
    # The standalone imperative paragraph is a directive too.
    assert "Run `make check` before opening a pull request." in by_text


def test_nested_bullets_are_detail_of_their_parent_not_directives() -> None:
    text = "# Rules\n\n## Testing\n\n- Use the real database\n  - one transaction per test\n  - never commit\n- Keep tests fast\n"
    doc = parse(text, "AGENTS.md").document
    assert doc is not None
    assert [d.text for d in doc.directives] == ["Use the real database", "Keep tests fast"]
    first = doc.directives[0]
    assert first.detail == "- one transaction per test\n- never commit"
    assert (first.line_start, first.line_end) == (5, 7)
    assert first.directive_key == "testing#1"
    assert doc.directives[1].directive_key == "testing#2"


def test_a_bullet_ending_with_a_colon_labels_its_children_as_directives() -> None:
    text = "- Database:\n  - Always use migrations\n  - Prefer UUID keys\n"
    doc = parse(text, "CLAUDE.md").document
    assert doc is not None
    assert [(d.text, d.section_path) for d in doc.directives] == [
        ("Always use migrations", ("Database",)),
        ("Prefer UUID keys", ("Database",)),
    ]


def test_prose_paragraphs_are_skipped_but_rule_paragraphs_are_kept() -> None:
    text = (
        "# Guide\n\n"
        "This repository contains the billing service and its workers.\n\n"
        "Always run the linter before pushing.\n\n"
        "Use feature branches for every change.\n\n"
        "The following commands are available:\n"
    )
    doc = parse(text, "README.md").document
    assert doc is not None
    assert doc.format == "plain_markdown"
    assert [d.text for d in doc.directives] == [
        "Always run the linter before pushing.",
        "Use feature branches for every change.",
    ]


def test_trivial_items_and_headings_alone_are_not_directives() -> None:
    text = "# Title\n\n## Section\n\n- `make`\n- ok\n- [Docs](docs.md)\n- Run `make test` first\n"
    doc = parse(text, "AGENTS.md").document
    assert doc is not None
    assert [d.text for d in doc.directives] == ["Run `make test` first"]


def test_markers_in_foreign_bullets_are_honoured() -> None:
    doc = parse("- [MAY] Use emojis in commit messages\n", ".clinerules").document
    assert doc is not None
    (directive,) = doc.directives
    assert (directive.text, directive.severity, directive.severity_source) == (
        "Use emojis in commit messages",
        "MAY",
        "marker",
    )


def test_foreign_directive_layer_and_topics_are_inferred_from_headings_and_text() -> None:
    text = "# Project\n\n## Database\n\n- Add an index for every foreign key used in a query\n"
    doc = parse(text, "AGENTS.md").document
    assert doc is not None
    (directive,) = doc.directives
    assert directive.layer == "4-Persistence"
    assert "persistence" in directive.topics
    assert doc.layer == "*"
    assert doc.always_apply is True


def test_bad_label_before_a_fence_marks_an_anti_pattern() -> None:
    text = "- Never build SQL with f-strings\n\nBad:\n\n```python\nf'select {x}'\n```\n"
    doc = parse(text, "AGENTS.md").document
    assert doc is not None
    assert [(p.language, p.is_anti_pattern) for p in doc.patterns] == [("python", True)]
