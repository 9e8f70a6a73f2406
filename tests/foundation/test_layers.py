"""The import arrows of DESIGN §1, checked by walking every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imports_of(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def test_rules_parser_is_pure() -> None:
    for module, names in imports_of("rules_parser").items():
        assert not names & {"memory_core", "server", "mcp", "click", "sqlite3", "aiosqlite"}, module


def test_memory_core_never_imports_adapters() -> None:
    for module, names in imports_of("memory_core").items():
        assert not names & {"server", "mcp", "click", "starlette", "uvicorn"}, module


def test_cli_import_path_is_free_of_the_mcp_sdk() -> None:
    import subprocess
    import sys

    code = "import sys, server.cli.main; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr
