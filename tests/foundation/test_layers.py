"""The import arrows of DESIGN §1, checked by walking every module's imports."""

from __future__ import annotations

import ast
import re
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


# Feature packages talk to storage through the ports only (issue 10): no SQL text, no
# connection, no backend module. The import-linter contracts check the imports; this checks
# what an import check cannot see: SQL strings and connection handles in the code itself.
FEATURES = ("documents", "rules", "hierarchy", "memories", "pipeline", "backup.py", "retrieval")
# SQL over memoir's own tables (RQL's own SELECT … FROM doc|chunk is a query language, not SQL).
_SQL = re.compile(
    r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|CREATE TABLE|CREATE INDEX)\b[^\n]*?\b"
    r"(item|item_fts|item_vec|resource|entity|relation|observation|category|meta|run|event|"
    r"tombstone|schema_migration)\b"
)
_HANDLES = (".execute(", ".executemany(", ".db.read", ".db.write", "conn.", "cursor(")
# Files whose connection is not memoir's store, with the reason.
_NOT_THE_STORE = {
    "memory_core/pipeline/runners/burr_runner.py": "Burr's own state file (its SQLite persister)",
}


def _feature_files() -> list[Path]:
    files: list[Path] = []
    for name in FEATURES:
        target = ROOT / "memory_core" / name
        if target.is_file():
            files.append(target)
        elif target.is_dir():
            files.extend(target.rglob("*.py"))
    return files


def test_no_feature_module_holds_sql_or_a_connection() -> None:
    offenders: list[str] = []
    for path in _feature_files():
        if str(path.relative_to(ROOT)) in _NOT_THE_STORE:
            continue
        text = path.read_text(encoding="utf-8")
        offenders.extend(
            f"{path.relative_to(ROOT)}: {m.group(0)[:60]}" for m in _SQL.finditer(text)
        )
        for marker in _HANDLES:
            if marker in text:
                offenders.append(f"{path.relative_to(ROOT)}: {marker.strip()}")
    assert not offenders, "\n".join(offenders)
