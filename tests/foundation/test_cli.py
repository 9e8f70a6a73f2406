"""The foundation commands, run as a real subprocess like a user or an agent would."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def memoir(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    base["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    base["HOME"] = str(cwd)  # the per-user default store must land in the test's folder
    base["XDG_DATA_HOME"] = str(cwd / "xdg")
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=cwd,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version_prints_the_version(tmp_path: Path) -> None:
    result = memoir("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith("memoir, version ")


def test_init_then_doctor_reports_a_healthy_private_wal_store(tmp_path: Path) -> None:
    created = memoir("init", str(tmp_path / "x"), cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    db = tmp_path / "x" / "memoir.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert "database_url" in (tmp_path / "x" / "memoir.toml").read_text()

    result = memoir("--db", f"sqlite:///{db}", "doctor", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["schema_version"] == "1"
    checks = {f["check"]: f for f in report["findings"]}
    assert checks["sqlite_vec"]["status"] == "ok"
    assert checks["fts5"]["status"] == "ok"
    assert checks["journal_mode"]["message"] == "WAL"
    assert checks["file_permissions"]["status"] == "ok"
    assert checks["embedder"]["status"] == "ok"  # the local model loads offline


def test_stats_json_names_versions_embedder_and_driver(tmp_path: Path) -> None:
    memoir("init", str(tmp_path), cwd=tmp_path)
    result = memoir("stats", "--json", cwd=tmp_path)  # found through ./memoir.toml
    assert result.returncode == 0, result.stderr
    store = json.loads(result.stdout)["store"]
    assert store["url"] == f"sqlite:///{tmp_path / 'memoir.db'}"
    assert store["sqlite_vec_version"].startswith("v")
    assert store["extension_loading"] in ("stdlib", "pysqlite3", "sqlean")
    assert store["embedder"] == {"id": "local:all-MiniLM-L6-v2-int8", "dimension": 384}
    assert store["journal_mode"] == "wal"


def test_database_url_from_the_environment_beats_memoir_toml(tmp_path: Path) -> None:
    memoir("init", str(tmp_path), cwd=tmp_path)
    other = tmp_path / "other" / "m.db"
    result = memoir(
        "stats", "--json", cwd=tmp_path, env={"MEMOIR_DATABASE_URL": f"sqlite:///{other}"}
    )
    # stats never creates a store: the missing one is an error with the command that creates it
    assert result.returncode != 0
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "database_unavailable"
    assert str(other) in error["message"] and "memoir init" in error["hint"]


def test_without_any_configuration_the_per_user_data_directory_is_used(tmp_path: Path) -> None:
    result = memoir("doctor", "--json", cwd=tmp_path)
    report = json.loads(result.stdout)
    assert str(tmp_path / "xdg") in report["store"]


def test_doctor_on_a_corrupted_file_reports_recovery_not_a_traceback(tmp_path: Path) -> None:
    memoir("init", str(tmp_path), cwd=tmp_path)
    db = tmp_path / "memoir.db"
    with db.open("r+b") as handle:  # overwrite the header and the first pages
        handle.seek(0)
        handle.write(b"\xde\xad\xbe\xef" * 4096)
    result = memoir("doctor", "--json", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    failed = [f for f in report["findings"] if f["status"] == "error"]
    assert failed and ".recover" in failed[0]["fix"]

    human = memoir("doctor", cwd=tmp_path)
    assert human.returncode == 1 and "fix:" in human.stdout and "Traceback" not in human.stderr


def test_invalid_setting_exits_non_zero_with_the_hint(tmp_path: Path) -> None:
    result = memoir("stats", cwd=tmp_path, env={"MEMOIR_SEARCH__RRF_K": "zero"})
    assert result.returncode != 0
    assert "search.rrf_k" in result.stderr and "hint:" in result.stderr


@pytest.mark.slow
def test_reembed_command_switches_the_store_to_the_configured_embedder(tmp_path: Path) -> None:
    memoir("init", str(tmp_path), cwd=tmp_path)
    env = {"MEMOIR_EMBEDDING__MODEL": "hash:48"}
    refused = memoir("stats", "--json", cwd=tmp_path, env=env)
    assert refused.returncode == 0  # stats reads without checking the embedder
    done = memoir("reembed", "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    stats = json.loads(memoir("stats", "--json", cwd=tmp_path, env=env).stdout)["store"]
    assert stats["embedder"] == {"id": "hash:48", "dimension": 48}
