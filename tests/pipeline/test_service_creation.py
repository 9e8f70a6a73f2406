"""Service creation (seed 004 §4, §5): scope columns, service_meta, reopen and scope checks."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from memory_core.errors import ConfigError, InvalidInputError, SchemaError, ScopeMismatchError
from memory_core.pipeline.service import DDL_VERSION, MemoryService
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, CATEGORIES, CHAT, OrgScope


class OtherScope(BaseModel):
    org_id: str
    project_id: str


class SwappedScope(BaseModel):
    user_id: str
    org_id: str


def test_service_meta_records_scope_schema_versions_and_redacted_providers(
    make_service: ServiceFactory, backend: str
) -> None:
    service = make_service(
        llm_providers={
            "default": {"model": "offline"},
            "strong": {"model": "openai:gpt-4o", "api_key_env": "OPENAI_API_KEY"},
        }
    )
    meta = service.meta
    assert [f["name"] for f in meta["scope_fields"]] == ["org_id", "user_id"]
    assert meta["scope_schema_hash"] == service.scope_spec.schema_hash
    assert meta["ddl_version"] == DDL_VERSION
    assert meta["pipeline_revision"] == 1
    assert len(meta["taxonomy_version"]) == 16
    assert meta["providers"]["llm"]["strong"]["api_key"] == {"env": "OPENAI_API_KEY"}
    assert meta["providers"]["storage"]["vector_index"] == {
        "provider": "pgvector" if backend == "postgres" else "bruteforce",
        "inferred": True,
    }
    # the meta is persisted, not only held by this object
    assert service.store.get_meta() == meta


def test_a_literal_credential_in_a_profile_is_refused(make_service: ServiceFactory) -> None:
    with pytest.raises(ConfigError, match=r"literal credential.*api_key") as caught:
        make_service(llm_providers={"default": {"model": "openai:gpt-4o", "api_key": "sk-x"}})
    assert "api_key_env" in str(caught.value)


def test_a_service_without_a_default_profile_is_refused_and_nothing_is_stored(
    make_service: ServiceFactory, layer_location: dict[str, Any]
) -> None:
    only_strong = {"strong": {"model": "openai:gpt-4o", "api_key_env": "OPENAI_API_KEY"}}
    with pytest.raises(ConfigError) as caught:
        make_service(llm_providers=only_strong)
    error = caught.value
    assert error.message == "llm_providers has no 'default' profile (got ['strong'])"
    assert error.hint is not None and '"default"' in error.hint
    if layer_location["provider"] == "sqlite":  # refused before the store was opened
        assert not Path(layer_location["path"]).exists()
    service = make_service(llm_providers={**only_strong, "default": {"model": "offline"}})
    assert service.pipeline_revision == 1 and service.runs() == []
    assert service.store.get_meta()["providers"]["llm"].keys() == {"default", "strong"}


def test_reopening_with_another_scope_model_is_refused_and_says_what_differs(
    make_service: ServiceFactory,
) -> None:
    make_service()
    with pytest.raises(ScopeMismatchError) as caught:
        make_service(scope_model=OtherScope)
    message = str(caught.value)
    assert "added ['project_id']" in message and "removed ['user_id']" in message
    assert "new store" in message
    with pytest.raises(ScopeMismatchError, match="another order"):
        make_service(scope_model=SwappedScope, boundary_fields=["org_id"])
    # the original model still opens
    assert make_service().meta["scope_fields"][0]["name"] == "org_id"


def test_a_scope_missing_a_field_is_refused(make_service: ServiceFactory) -> None:
    service = make_service()
    with pytest.raises(InvalidInputError, match=r"missing \['user_id'\]"):
        service.memorize({"org_id": "acme"}, conversation=CHAT)
    with pytest.raises(InvalidInputError, match=r"unknown \['team'\]"):
        service.list_categories({**ALICE, "team": "x"})
    with pytest.raises(InvalidInputError, match="multi-value"):
        service.memorize({"org_id": ["a", "b"], "user_id": "u"}, content="x y z w")


def test_validate_mode_refuses_a_store_that_was_never_created(
    make_service: ServiceFactory,
) -> None:
    with pytest.raises(SchemaError, match="ddl_mode='validate'"):
        make_service(ddl_mode="validate")
    make_service()
    assert make_service(ddl_mode="validate").meta["ddl_version"] == DDL_VERSION


def test_boundary_fields_must_be_scope_fields(make_service: ServiceFactory) -> None:
    with pytest.raises(ConfigError, match=r"boundary fields \['tenant'\]"):
        make_service(boundary_fields=["tenant"])


def test_sqlite_scope_fields_are_real_columns_and_the_prefix_of_every_composite_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "layer.db"
    MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": {"provider": "sqlite", "path": str(path)}},
        embedder="hash:64",
    ).close()
    conn = sqlite3.connect(path)
    for table in ("layer_resource", "layer_item", "layer_category", "layer_intention"):
        columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        assert columns[:2] == ["org_id", "user_id"], table
        indexes = [r[1] for r in conn.execute(f"PRAGMA index_list({table})")]
        composite = [i for i in indexes if not i.startswith("sqlite_autoindex")]
        assert composite, table
        for index in composite:
            cols = [r[2] for r in conn.execute(f"PRAGMA index_info({index})")]
            assert cols[:2] == ["org_id", "user_id"], (table, index)
    conn.close()


@pytest.mark.postgres
def test_postgres_scope_fields_are_real_columns_and_the_prefix_of_every_composite_index(
    layer_pg_url: str,
) -> None:
    import psycopg

    service = MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": {"provider": "postgres", "url": layer_pg_url}},
        embedder="hash:64",
    )
    service.memorize(ALICE, conversation=CHAT)  # the first vector types the column
    service.close()
    with psycopg.connect(layer_pg_url) as conn:
        for table in ("layer_resource", "layer_item", "layer_category", "layer_intention"):
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                    "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (table,),
                )
            ]
            assert columns[:2] == ["org_id", "user_id"], table
            indexes = conn.execute(
                "SELECT i.relname, am.amname, ix.indkey::int2[], ix.indisprimary, ix.indisunique "
                "FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid "
                "JOIN pg_am am ON am.oid = i.relam WHERE ix.indrelid = %s::regclass",
                (table,),
            ).fetchall()
            composite = [r for r in indexes if r[1] == "btree" and len(r[2]) > 1]
            assert composite, table
            for name, _, keys, _, _ in composite:
                assert list(keys[:2]) == [1, 2], (table, name)  # attnums of org_id, user_id
        kinds = conn.execute(
            "SELECT am.amname, pg_get_indexdef(i.oid) FROM pg_index ix "
            "JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_am am ON am.oid = i.relam "
            "WHERE ix.indrelid = 'layer_item'::regclass"
        ).fetchall()
        assert {"hnsw", "gin"} <= {k[0] for k in kinds}
        dim = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'layer_item'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert dim == ("vector(64)",)


@pytest.mark.postgres
def test_postgres_meta_never_records_the_password(layer_pg_url: str) -> None:
    # the test server trusts local connections, so the password is carried but not checked
    secret_url = layer_pg_url.replace("postgresql://postgres:@", "postgresql://postgres:s3cret@")
    assert secret_url != layer_pg_url
    service = MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": {"provider": "postgres", "url": secret_url}},
        embedder="hash:64",
    )
    recorded = service.meta["providers"]["storage"]["metadata_store"]
    service.close()
    assert recorded["provider"] == "postgres"
    assert "s3cret" not in str(recorded) and "***" in recorded["url"]
