from __future__ import annotations

from pathlib import Path

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.errors import ConfigError
from memory_core.service import MemoirSync, resolve_database_url


def test_memoir_sync_opens_reports_and_closes(tmp_path: Path) -> None:
    settings = load_settings(cwd=tmp_path, environ={})
    with MemoirSync(
        f"sqlite:///{tmp_path}/s.db", settings=settings, embedder=create_embedder("hash:16")
    ) as memoir:
        stats = memoir.stats()
    assert stats["embedder"] == {"id": "hash:16", "dimension": 16}
    assert (tmp_path / "s.db").exists()


def test_store_resolution_order(tmp_path: Path) -> None:
    (tmp_path / "memoir.toml").write_text("")
    settings = load_settings(cwd=tmp_path, environ={})
    assert resolve_database_url(settings, "sqlite:///explicit.db") == "sqlite:///explicit.db"
    assert resolve_database_url(settings) == f"sqlite:///{tmp_path.resolve() / 'memoir.db'}"
    from_env = load_settings(cwd=tmp_path, environ={"MEMOIR_DATABASE_URL": "sqlite:///env.db"})
    assert resolve_database_url(from_env) == "sqlite:///env.db"


def test_unknown_url_scheme_is_a_config_error_with_the_accepted_forms(tmp_path: Path) -> None:
    from memory_core.storage import parse_database_url

    try:
        parse_database_url("oracle://scott@db/x")
    except ConfigError as exc:
        assert "oracle" in exc.message and "sqlite:///" in (exc.hint or "")
    else:
        raise AssertionError("expected ConfigError")


def test_password_never_appears_in_a_redacted_url() -> None:
    from memory_core.storage import parse_database_url

    url = parse_database_url("postgresql://bob:s3cret@127.0.0.1:5432/test")
    assert "s3cret" not in url.redacted() and url.password == "s3cret"
