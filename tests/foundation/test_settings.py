from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.config import load_settings
from memory_core.errors import ConfigError


def write_toml(folder: Path, body: str) -> Path:
    path = folder / "memoir.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_defaults_apply_when_nothing_is_configured(tmp_path: Path) -> None:
    settings = load_settings(cwd=tmp_path, environ={})
    assert settings.database_url is None
    assert settings.embedding.model == "local"
    assert settings.search.rrf_k == 60
    assert settings.rules.token_budget == 900


def test_toml_overrides_defaults_and_env_overrides_toml_and_explicit_overrides_env(
    tmp_path: Path,
) -> None:
    write_toml(tmp_path, "[search]\nrrf_k = 10\nmax_limit = 7\n[rules]\ntoken_budget = 500\n")
    env = {"MEMOIR_SEARCH__RRF_K": "20", "MEMOIR_RULES__TOKEN_BUDGET": "600"}
    settings = load_settings({"rules": {"token_budget": 700}}, cwd=tmp_path, environ=env)
    assert settings.search.max_limit == 7  # toml beats default
    assert settings.search.rrf_k == 20  # env beats toml
    assert settings.rules.token_budget == 700  # explicit beats env


def test_nearest_memoir_toml_is_found_from_a_subfolder(tmp_path: Path) -> None:
    write_toml(tmp_path, "[documents]\nchunk_tokens = 123\n")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    settings = load_settings(cwd=nested, environ={})
    assert settings.documents.chunk_tokens == 123
    assert settings.config_file == str(tmp_path / "memoir.toml")


def test_relative_sqlite_url_in_toml_is_relative_to_the_file(tmp_path: Path) -> None:
    write_toml(tmp_path, 'database_url = "sqlite:///data/m.db"\n')
    settings = load_settings(cwd=tmp_path / ".", environ={})
    assert settings.database_url == f"sqlite:///{(tmp_path / 'data' / 'm.db').resolve()}"


def test_top_level_env_variable_sets_the_database_url(tmp_path: Path) -> None:
    settings = load_settings(cwd=tmp_path, environ={"MEMOIR_DATABASE_URL": "sqlite:////x/y.db"})
    assert settings.database_url == "sqlite:////x/y.db"


def test_invalid_value_names_the_key_and_the_variable_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd=tmp_path, environ={"MEMOIR_HIERARCHY__DEPTH": "101"})
    assert "hierarchy.depth" in caught.value.message
    assert "MEMOIR_HIERARCHY__DEPTH" in (caught.value.hint or "")


def test_unknown_key_in_toml_is_an_error_not_silently_ignored(tmp_path: Path) -> None:
    write_toml(tmp_path, "[search]\nrrf_kk = 3\n")
    with pytest.raises(ConfigError, match="rrf_kk"):
        load_settings(cwd=tmp_path, environ={})


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[search\n")
    with pytest.raises(ConfigError, match=str(path)):
        load_settings(cwd=tmp_path, environ={})
