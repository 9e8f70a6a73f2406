"""The memory-layer commands, run as a real subprocess on a real SQLite file or PostgreSQL
database named by the layer file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.conftest import fresh_pg_schema

LAYER = """
scope_fields = ["org_id", "user_id"]
boundary_fields = ["org_id"]
embedder = "hash:256"
categories = [
  { key = "preferences", name = "Preferences", description = "likes, habits, food and drink" },
  { key = "work", name = "Work", description = "projects, deadlines, migrations, APIs" },
]
"""


def memoir(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env["HOME"] = str(cwd)
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _json(result: subprocess.CompletedProcess[str]) -> dict:  # type: ignore[type-arg]
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(json.loads(result.stdout))


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_memorize_retrieve_evolve_and_pipeline_commands(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    if store == "postgres":
        location = fresh_pg_schema(request.getfixturevalue("pg_admin_url"))
    else:
        location = "layer.db"
    (tmp_path / "memoir-layer.toml").write_text(f"store = {json.dumps(location)}\n{LAYER}")
    chat = tmp_path / "chat.json"
    chat.write_text(
        json.dumps(
            [
                {"role": "user", "content": "I always drink green tea in the afternoon."},
                {"role": "user", "content": "I want to ship the payments API before March."},
            ]
        )
    )
    alice = ("--scope", "org_id=acme", "--scope", "user_id=alice")
    stored = _json(memoir("memorize", *alice, "--conversation", str(chat), "--json", cwd=tmp_path))
    assert stored["ok"] and len(stored["items_added"]) == 2
    again = _json(memoir("memorize", *alice, "--conversation", str(chat), "--json", cwd=tmp_path))
    assert again["duplicate"] is True

    found = _json(
        memoir("retrieve", "--scope", "org_id=acme", "--scope", "user_id=*", "green tea",
               "--json", cwd=tmp_path)
    )  # fmt: skip
    assert "green tea" in found["items"][0]["text"]
    human = memoir("retrieve", *alice, "green tea", cwd=tmp_path)
    assert human.returncode == 0 and "green tea" in human.stdout

    refused = memoir("retrieve", "--scope", "org_id=*", "--scope", "user_id=alice", "tea",
                     cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 2
    assert "boundary field 'org_id'" in refused.stderr and "hint:" in refused.stderr

    evolved = _json(memoir("evolve", *alice, "--json", cwd=tmp_path))
    assert "superseded" in evolved["diff"]

    assert _json(memoir("pipeline", "config", "build_context", "budget_tokens=300", "--json",
                        cwd=tmp_path))["revision"] == 2  # fmt: skip
    shown = _json(memoir("pipeline", "show", "retrieve", "--json", cwd=tmp_path))
    assert shown["pipelines"]["retrieve"][-1]["config"] == {"budget_tokens": 300}
    diff = _json(memoir("pipeline", "diff", "1", "--json", cwd=tmp_path))["diff"]
    assert diff["retrieve"]["changed"]["build_context"]["config"]["to"] == {"budget_tokens": 300}
    broken = memoir("pipeline", "remove", "extract_items", cwd=tmp_path)
    assert broken.returncode != 0 and "dedupe_merge" in broken.stderr
    assert _json(memoir("pipeline", "rollback", "1", "--json", cwd=tmp_path))["revision"] == 3
    second_pass = json.dumps(
        {"step_id": "rerank_again", "impl": "verify_rerank", "role": "verify",
         "requires": ["ranked"], "produces": ["ranked"], "config": {"keep": 1}}
    )  # fmt: skip
    bad = memoir("pipeline", "insert", "--before", "recall_items", "--step", second_pass,
                 cwd=tmp_path)  # fmt: skip
    assert bad.returncode != 0 and "rerank_again" in bad.stderr and "ranked" in bad.stderr
    assert _json(memoir("pipeline", "insert", "--after", "verify_rerank", "--step", second_pass,
                        "--json", cwd=tmp_path))["revision"] == 4  # fmt: skip
    one = _json(memoir("retrieve", *alice, "tea payments", "--json", cwd=tmp_path))
    assert len(one["items"]) == 1
    keep_two = json.dumps(
        {
            "step_id": "rerank_two",
            "impl": "verify_rerank",
            "role": "verify",
            "requires": ["ranked"],
            "produces": ["ranked"],
            "config": {"keep": 2},
        }
    )
    assert _json(memoir("pipeline", "replace", "rerank_again", "--step", keep_two, "--json",
                        cwd=tmp_path))["revision"] == 5  # fmt: skip
    listed = _json(memoir("pipeline", "revisions", "--json", cwd=tmp_path))
    assert [r["revision"] for r in listed["revisions"]] == [1, 2, 3, 4, 5]
    assert (tmp_path / "layer.db").exists() == (store == "sqlite")  # the store the file names


def test_a_missing_layer_file_is_a_clear_error(tmp_path: Path) -> None:
    result = memoir("evolve", "--scope", "org_id=a", cwd=tmp_path)
    assert result.returncode == 1
    assert "no memory layer file" in result.stderr and "--layer" in result.stderr


def test_memorize_file_reads_only_inside_the_layer_files_allowed_roots(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "notes.md").write_text("The deploy window is Tuesday morning.\n")
    (project / "private.txt").write_text("The vault combination is 31-41-59.\n")
    (project / "memoir-layer.toml").write_text(
        f'store = "layer.db"\nallowed_roots = ["docs"]\n{LAYER}'
    )
    alice = ("--scope", "org_id=acme", "--scope", "user_id=alice")

    refused = memoir("memorize", *alice, "--file", "private.txt", cwd=project)
    stored = _json(memoir("memorize", *alice, "--file", "docs/notes.md", "--json", cwd=project))

    assert refused.returncode == 2, refused.stdout + refused.stderr
    shown = refused.stdout + refused.stderr
    assert "private.txt" in shown and str((project / "docs").resolve()) in shown
    assert "allowed_roots" in shown
    assert len(stored["items_added"]) == 1


def test_the_cli_passes_its_principal_to_the_layers_authorise_hook(tmp_path: Path) -> None:
    (tmp_path / "memoir-layer.toml").write_text(
        f'store = "layer.db"\n{LAYER}authorise = "tests.pipeline.layer_hooks:caller_owns_user_id"\n'
    )
    ann = ("--scope", "org_id=acme", "--scope", "user_id=ann")
    given = _json(memoir("memorize", *ann, "--text", "I always drink green tea in the afternoon.", "--principal", "ann",
                         "--json", cwd=tmp_path))  # fmt: skip
    assert given["items_added"]
    found = _json(memoir("retrieve", *ann, "tea", "--principal", "ann", "--json", cwd=tmp_path))
    assert found["ok"] and "tea" in found["context"]
    as_os_user = memoir("evolve", *ann, "--json", cwd=tmp_path)  # the principal: the OS user
    assert as_os_user.returncode == 2, as_os_user.stdout + as_os_user.stderr
    error = json.loads(as_os_user.stdout)["error"]
    assert "access denied on scope field 'user_id'" in error["message"]
    assert '"id": "local:' in error["message"] and '"transport": "cli"' in error["message"]
