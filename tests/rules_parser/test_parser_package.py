"""Package contracts: a sorted public API, purity, and the import boundary."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rules_parser
from rules_parser import FORMATS, parse

PACKAGE = Path(rules_parser.__file__).resolve().parent
ALLOWED_THIRD_PARTY = {"pydantic", "markdown_it", "rapidfuzz", "structlog"}


def _isort_style(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions.
    if name.isupper():
        return (0, name)
    return (1, name) if name[0].isupper() else (2, name)


def test_all_is_sorted_and_every_name_exists() -> None:
    assert rules_parser.__all__ == sorted(rules_parser.__all__, key=_isort_style)
    for name in rules_parser.__all__:
        assert hasattr(rules_parser, name), name


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_modules_import_only_the_stdlib_and_allowed_libraries(module: Path) -> None:
    import sys

    third_party = {
        name
        for name in _imports(module)
        if name not in sys.stdlib_module_names and name != "rules_parser"
    }
    assert third_party <= ALLOWED_THIRD_PARTY, third_party
    assert "memory_core" not in third_party and "server" not in third_party


@pytest.mark.parametrize("module", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_only_the_loader_touches_files(module: Path) -> None:
    if module.name == "loader.py":
        return
    source = module.read_text()
    for call in ("open(", ".read_text(", ".read_bytes(", "os.walk", ".stat("):
        assert call not in source, f"{module.name} uses {call}"


def test_parse_rejects_an_unknown_forced_format_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="template") as info:
        parse("- x", "x.md", format="yaml")  # type: ignore[arg-type]
    assert all(f in str(info.value) for f in FORMATS)


def test_empty_text_gives_no_document_and_a_warning() -> None:
    result = parse("  \n\n", "x.md")
    assert result.document is None
    assert [(i.severity, i.field) for i in result.issues] == [("warning", "document")]
