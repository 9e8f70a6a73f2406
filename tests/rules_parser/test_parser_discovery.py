"""discover: every rule file a team has, and a reason for every markdown file left out."""

from __future__ import annotations

from pathlib import Path

from rules_parser import discover, load

RULE = "---\ndescription: x\n---\n\n- Always do y.\n"
PLAIN = "# Notes\n\nSome prose.\n"


def _write(root: Path, relative: str, text: str = PLAIN) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _tree(root: Path) -> None:
    _write(
        root,
        "AGENTS.md",
        "# Agents\n\nRead @docs/conventions.md and [the API rules](docs/api.md).\n",
    )
    _write(root, "CLAUDE.md", "# Claude\n\n@.claude/shared.md\n")
    _write(root, "services/billing/AGENTS.md")
    _write(root, "packages/web/CLAUDE.md")
    _write(root, "GEMINI.md")
    _write(root, ".claude/rules/api.md", "---\npaths:\n  - src/api/**\n---\n\n- Validate input.\n")
    _write(root, ".claude/shared.md", "- Keep commits small.\n")
    _write(root, ".cursor/rules/react.mdc", RULE)
    _write(root, ".cursor/rules/nested/style.md", "- Use tabs.\n")
    _write(root, ".clinerules/testing.md")
    _write(root, ".roo/rules-code/style.md")
    _write(root, ".windsurf/rules/general.md")
    _write(root, ".github/copilot-instructions.md")
    _write(root, ".github/instructions/py.instructions.md")
    _write(root, ".github/ISSUE_TEMPLATE/bug.md")
    _write(root, "agents/rules/naming.md")  # a folder named for rules
    _write(root, "docs/conventions.md")  # imported by AGENTS.md
    _write(root, "docs/api.md")  # linked from AGENTS.md
    _write(root, "docs/perf.md", "---\ntitle: Memoize\nimpact: HIGH\ntags: perf\n---\n\nx\n")
    _write(root, "docs/history.md")  # plain: skipped with a reason
    _write(root, "README.md")
    _write(root, "node_modules/pkg/AGENTS.md")


EXPECTED = {
    "AGENTS.md",
    "CLAUDE.md",
    "services/billing/AGENTS.md",
    "packages/web/CLAUDE.md",
    "GEMINI.md",
    ".claude/rules/api.md",
    ".claude/shared.md",
    ".cursor/rules/react.mdc",
    ".cursor/rules/nested/style.md",
    ".clinerules/testing.md",
    ".roo/rules-code/style.md",
    ".windsurf/rules/general.md",
    ".github/copilot-instructions.md",
    ".github/instructions/py.instructions.md",
    "agents/rules/naming.md",
    "docs/conventions.md",
    "docs/api.md",
    "docs/perf.md",
}


def test_a_repository_rules_folder_is_found_whole(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = discover(tmp_path)
    taken = {p.relative_to(tmp_path).as_posix() for p in found.files}
    assert taken == EXPECTED
    assert found.reasons[tmp_path / "docs/conventions.md"] == "imported by AGENTS.md"
    assert found.reasons[tmp_path / ".claude/shared.md"] == "imported by CLAUDE.md"


def test_every_markdown_file_left_out_has_a_reason(tmp_path: Path) -> None:
    _tree(tmp_path)
    skipped = {p.relative_to(tmp_path).as_posix(): why for p, why in discover(tmp_path).skipped}
    assert set(skipped) == {"docs/history.md", "README.md", ".github/ISSUE_TEMPLATE/bug.md"}
    assert skipped["docs/history.md"].startswith("plain markdown")
    assert "hidden folder" in skipped[".github/ISSUE_TEMPLATE/bug.md"]


def test_include_takes_and_exclude_leaves_out(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = discover(tmp_path, include=["docs/*.md"], exclude=[".cursor/**", "GEMINI.md"])
    taken = {p.relative_to(tmp_path).as_posix() for p in found.files}
    assert "docs/history.md" in taken
    assert not any(p.startswith(".cursor/") for p in taken) and "GEMINI.md" not in taken
    reasons = {p.relative_to(tmp_path).as_posix(): why for p, why in found.skipped}
    assert reasons["GEMINI.md"] == "excluded by --exclude"


def test_claude_rules_paths_front_matter_become_globs(tmp_path: Path) -> None:
    _tree(tmp_path)
    document = load(tmp_path / ".claude/rules/api.md", display_path=".claude/rules/api.md")
    assert document.document is not None
    assert document.document.globs == ("src/api/**",)
    assert document.document.always_apply is False


def test_an_import_outside_the_folder_is_reported_not_read(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _write(tmp_path, "secret.md")
    _write(root, "AGENTS.md", "@../secret.md\n@~/.claude/personal.md\n")
    found = discover(root)
    assert [p.name for p in found.files] == ["AGENTS.md"]
    reasons = {p.name: why for p, why in found.skipped}
    assert reasons["secret.md"] == "imported by AGENTS.md from outside the folder read"
    assert "home-folder" in reasons["personal.md"]


def _taken(root: Path, **kwargs: object) -> dict[str, str]:
    found = discover(root, **kwargs)  # type: ignore[arg-type]
    return {p.relative_to(root).as_posix(): found.reasons[p] for p in found.files}


def test_paths_an_agent_file_tells_the_reader_to_read_are_followed(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "AGENTS.md",
        "# Agents\n\nBefore changing the API, see `guides/api-design.md`.\n\n"
        "| Task | Guide |\n| --- | --- |\n| Write tests | `guides/testing.md` |\n\n"
        "Update `CHANGELOG.md` and `guides/release-notes.md` on every change.\n"
        "Details in `guides/missing.md`.\n",
    )
    _write(tmp_path, "guides/api-design.md", "- Name things well. Read `naming.md` too.\n")
    _write(tmp_path, "guides/naming.md")  # followed from api-design.md, relative to it
    _write(tmp_path, "guides/testing.md")  # a table whose column is "Guide"
    _write(tmp_path, "guides/release-notes.md")  # named, but not as reading
    _write(tmp_path, "CHANGELOG.md", "# Changelog\n\nSee `guides/history.md`.\n")
    found = discover(tmp_path)
    taken = _taken(tmp_path)
    assert set(taken) == {
        "AGENTS.md",
        "guides/api-design.md",
        "guides/testing.md",
        "guides/naming.md",
    }
    assert taken["guides/naming.md"] == "imported by guides/api-design.md"
    skipped = {p.relative_to(tmp_path).as_posix(): why for p, why in found.skipped}
    assert skipped["guides/release-notes.md"].startswith("plain markdown")
    assert skipped["CHANGELOG.md"].startswith("plain markdown")
    assert "guides/missing.md" not in skipped  # a code span is not a promise the file exists


def test_a_link_to_a_folder_of_docs_takes_its_markdown_files(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "CLAUDE.md",
        "Read [the contributor guides](contributing/) and [the source](src/main.py).\n",
    )
    _write(tmp_path, "contributing/style.md")
    _write(tmp_path, "contributing/reviews.markdown")
    _write(tmp_path, "contributing/deep/old.md")  # one level: not recursive
    _write(tmp_path, "src/main.py", "print('x')\n")
    taken = _taken(tmp_path)
    assert set(taken) == {"CLAUDE.md", "contributing/style.md", "contributing/reviews.markdown"}
    assert taken["contributing/style.md"] == "imported by CLAUDE.md"


def test_contributing_md_is_the_teams_rules_for_contributors(tmp_path: Path) -> None:
    _write(tmp_path, "CONTRIBUTING.md", "# Contributing\n\n- Run the tests before a PR.\n")
    _write(tmp_path, ".github/CONTRIBUTING.md")
    _write(tmp_path, "vendor_pkg/CONTRIBUTING.md")  # a nested package's: plain markdown
    _write(tmp_path, ".windsurf/rules/general.md")  # an agent rule file does not replace it
    found = discover(tmp_path)
    taken = _taken(tmp_path)
    assert taken["CONTRIBUTING.md"] == "CONTRIBUTING.md: the team's rules for contributors"
    assert ".github/CONTRIBUTING.md" in taken
    skipped = {p.relative_to(tmp_path).as_posix(): why for p, why in found.skipped}
    assert skipped["vendor_pkg/CONTRIBUTING.md"].startswith("plain markdown")
    assert "CONTRIBUTING.md" not in _taken(tmp_path, exclude=["CONTRIBUTING.md"])
