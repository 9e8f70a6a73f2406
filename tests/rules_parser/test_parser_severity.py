"""Severity markers and wording inference (seed 003 Req. 8.2, issue: inference table)."""

from __future__ import annotations

import pytest

from rules_parser import infer_severity, split_severity_marker


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # markers win over wording
        ("[MUST] Use X", ("MUST", "marker")),
        ("[should] never mind", ("SHOULD", "marker")),
        ("(MAY) Use X", ("MAY", "marker")),
        ("**MUST** Use X", ("MUST", "marker")),
        ("**[SHOULD]** Use X", ("SHOULD", "marker")),
        ("MUST: Use X", ("MUST", "marker")),
        ("MAY - Use X", ("MAY", "marker")),
        # MUST wording
        ("You must validate input", ("MUST", "inferred")),
        ("Never commit secrets", ("MUST", "inferred")),
        ("Always run the tests", ("MUST", "inferred")),
        ("Do not use eval", ("MUST", "inferred")),
        ("Don't use eval", ("MUST", "inferred")),
        ("Don’t use eval", ("MUST", "inferred")),
        ("A review is required before merging", ("MUST", "inferred")),
        ("Services shall not import routes", ("MUST", "inferred")),
        # SHOULD wording
        ("You should write docstrings", ("SHOULD", "inferred")),
        ("Prefer composition over inheritance", ("SHOULD", "inferred")),
        ("Avoid global state", ("SHOULD", "inferred")),
        ("Type hints are recommended", ("SHOULD", "inferred")),
        # MAY wording
        ("You may use emojis", ("MAY", "inferred")),
        ("Consider caching results", ("MAY", "inferred")),
        ("You can use tabs", ("MAY", "inferred")),
        ("Optionally add a changelog entry", ("MAY", "inferred")),
        # strongest cue wins
        ("Prefer small PRs and never force-push", ("MUST", "inferred")),
        ("Consider X, but you should measure first", ("SHOULD", "inferred")),
        # no cue: default
        ("Use tabs", ("SHOULD", "default")),
        ("Keep functions pure where you can", ("SHOULD", "default")),
        # cue words only count as whole words
        ("Mustard is a condiment", ("SHOULD", "default")),
        ("Mayonnaise too", ("SHOULD", "default")),
        ("MUSTANG: fast car", ("SHOULD", "default")),
        ("", ("SHOULD", "default")),
    ],
)
def test_infer_severity(text: str, expected: tuple[str, str]) -> None:
    assert infer_severity(text) == expected


def test_split_severity_marker_returns_the_statement_without_the_marker() -> None:
    assert split_severity_marker("[MUST]   Validate input ") == ("MUST", "Validate input")
    assert split_severity_marker("Validate input") == (None, "Validate input")
    assert split_severity_marker("[MUST]") == ("MUST", "")
