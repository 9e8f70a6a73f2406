"""discover_rule_files and load: the only file-system code in rules_parser."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from parser_testkit import template

from rules_parser import discover_rule_files, load
from rules_parser.loader import MAX_FILE_BYTES


def _write(root: Path, relative: str, text: str = "- Use tabs for indentation\n") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _relative(paths: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root.resolve()).as_posix() for p in paths]


def test_discovery_finds_every_supported_format_and_skips_the_rest(tmp_path: Path) -> None:
    wanted = [
        "AGENTS.md",
        "CLAUDE.md",
        ".cursor/rules/react.mdc",
        ".cursor/rules/nested/db.mdc",
        ".clinerules/01-style.md",
        ".roo/rules/general.md",
        ".roo/rules-code/notes.txt",
        ".github/copilot-instructions.md",
        ".github/instructions/py.instructions.md",
        "docs/rules/api.md",
        "services/billing/AGENTS.md",
    ]
    skipped = [
        ".git/info/rules.md",
        "node_modules/pkg/README.md",
        ".venv/lib/site.md",
        ".idea/notes.md",
        ".github/ISSUE_TEMPLATE/bug.md",
        "src/app.py",
        ".cursor/settings.json",
    ]
    for relative in wanted + skipped:
        _write(tmp_path, relative)
    found = _relative(discover_rule_files(tmp_path), tmp_path)
    assert sorted(found) == sorted(wanted)


def test_a_clinerules_file_and_roorules_file_at_the_root_are_found(tmp_path: Path) -> None:
    _write(tmp_path, ".clinerules")
    _write(tmp_path, ".roorules-architect")
    _write(tmp_path, ".env")
    assert sorted(_relative(discover_rule_files(tmp_path), tmp_path)) == [
        ".clinerules",
        ".roorules-architect",
    ]


def test_plain_markdown_can_be_left_out(tmp_path: Path) -> None:
    _write(tmp_path, "README.md")
    _write(tmp_path, "AGENTS.md")
    found = discover_rule_files(tmp_path, include_plain=False)
    assert _relative(found, tmp_path) == ["AGENTS.md"]


def test_discovery_order_is_stable(tmp_path: Path) -> None:
    for name in ("b.md", "a.md", "c/d.md", "AGENTS.md"):
        _write(tmp_path, name)
    assert discover_rule_files(tmp_path) == discover_rule_files(tmp_path)
    assert _relative(discover_rule_files(tmp_path), tmp_path) == [
        "AGENTS.md",
        "a.md",
        "b.md",
        "c/d.md",
    ]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinks_that_escape_the_root_are_skipped(tmp_path: Path) -> None:
    root = tmp_path / "project"
    outside = _write(tmp_path, "outside/secret-rules.md")
    _write(tmp_path, "outside/more/AGENTS.md")
    inside = _write(root, "rules/real.md")
    (root / "escape.md").symlink_to(outside)
    (root / "escape-dir").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "alias.md").symlink_to(inside)
    (root / "dangling.md").symlink_to(tmp_path / "nope.md")
    (root / "loop").symlink_to(root, target_is_directory=True)
    found = _relative(discover_rule_files(root), root)
    assert found == ["alias.md", "rules/real.md"]


def test_load_parses_a_file_and_records_the_display_path(tmp_path: Path) -> None:
    path = _write(tmp_path, "rules/api.md", template("## Directives\n\n### [MUST] A\n"))
    result = load(path, display_path="rules/api.md")
    assert result.ok
    assert result.document is not None and result.document.path == "rules/api.md"


def test_load_strips_a_utf8_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.md"
    path.write_bytes("\ufeff# Rule: X\n".encode())
    result = load(path)
    assert result.document is not None and result.document.title == "X"


def test_load_reports_non_utf8_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.md"
    path.write_bytes("# Règles\n\n- Évitez ça\n".encode("latin-1"))
    result = load(path)
    assert result.document is None
    (issue,) = result.issues
    assert (issue.severity, issue.field, issue.line) == ("error", "encoding", 1)


def test_load_rejects_files_over_the_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "huge.md"
    path.write_bytes(b"- x\n" * (MAX_FILE_BYTES // 4 + 1))
    result = load(path)
    assert result.document is None
    assert result.errors[0].field == "file"
    assert str(MAX_FILE_BYTES) in result.errors[0].message


def test_load_reports_missing_files_and_folders_instead_of_raising(tmp_path: Path) -> None:
    assert load(tmp_path / "nope.md").errors[0].message.startswith("file does not exist")
    assert "folder" in load(tmp_path).errors[0].message


def test_load_reports_unreadable_files(tmp_path: Path) -> None:
    path = _write(tmp_path, "locked.md")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):  # running as root: permissions do not apply
            pytest.skip("permissions are not enforced for this user")
        result = load(path)
        assert result.document is None and result.errors[0].field == "file"
    finally:
        path.chmod(0o644)
