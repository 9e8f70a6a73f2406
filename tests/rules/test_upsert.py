"""Upsert: graph nodes and edges, statistics, idempotence, merge vs overwrite, safety."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from rule_texts import AUTH_RULE
from rules_testkit import write_rules
from structlog.testing import capture_logs

from memory_core.errors import InvalidInputError, PathNotAllowedError
from memory_core.rules.service import RulesService
from memory_core.service import Memoir
from rules_parser import PARSER_VERSION

pytestmark = pytest.mark.anyio


async def _rows(memoir: Memoir, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return await memoir.store.db.read(lambda conn: [tuple(r) for r in conn.execute(sql, params)])


async def _count(memoir: Memoir, sql: str, *params: Any) -> int:
    return int((await _rows(memoir, sql, *params))[0][0])


async def test_template_document_becomes_graph_nodes_and_edges(
    service: RulesService, memoir: Memoir, project: Path
) -> None:
    report = await service.upsert_markdown([str(project / "rules" / "auth.md")], scope="s")

    assert report.rules_upserted == 1
    assert report.directives_added == 3
    assert report.patterns_extracted == 1
    assert report.sections_created == 7  # title, When to Apply, Directives, 3 directives, Related
    assert report.documents[0].status == "created"
    assert report.documents[0].path == "rules/auth.md"
    kinds = dict(await _rows(memoir, "SELECT kind, count(*) FROM entity GROUP BY kind"))
    for kind in ("rule", "topic", "layer", "section", "pattern", "severity", "condition"):
        assert kinds.get(kind, 0) >= 1, kind
    edges = {r[0] for r in await _rows(memoir, "SELECT DISTINCT rel_type FROM relation")}
    assert {
        "authoritative_for",
        "layer",
        "topic",
        "severity",
        "when_to_apply",
        "related",
        "has_directive",
        "has_section",
        "contains",
        "has_pattern",
    } <= edges
    relations = await _count(memoir, "SELECT count(*) FROM relation")
    assert report.relations_established == relations


async def test_rule_metadata_edges_point_at_the_right_nodes(
    loaded: RulesService, memoir: Memoir
) -> None:
    authoritative = await _rows(
        memoir,
        "SELECT t.norm_name FROM relation r JOIN entity rule ON rule.entity_id = r.src_id "
        "JOIN entity t ON t.entity_id = r.dst_id WHERE r.rel_type = 'authoritative_for' "
        "AND rule.norm_name = 'auth'",
    )
    assert sorted(r[0] for r in authoritative) == ["authentication", "sessions"]
    severities = await _rows(
        memoir,
        "SELECT item.metadata ->> '$.statement', e.name FROM relation r "
        "JOIN item ON item.item_id = r.src_id JOIN entity e ON e.entity_id = r.dst_id "
        "WHERE r.rel_type = 'severity' AND r.src_kind = 'item'",
    )
    assert ("Offer passkeys", "MAY") in severities
    assert ("Hash passwords with the platform library", "MUST") in severities


async def test_topics_meet_across_documents(loaded: RulesService, memoir: Memoir) -> None:
    # auth.md says "auth", api-validation.md "Authentication", migrations.md "authn".
    names = [r[0] for r in await _rows(memoir, "SELECT norm_name FROM entity WHERE kind='topic'")]
    assert "authentication" in names
    assert not {"auth", "authn"} & set(names)
    rules = await _rows(
        memoir,
        "SELECT DISTINCT rule.norm_name FROM relation r JOIN entity rule ON rule.entity_id = "
        "r.src_id JOIN entity t ON t.entity_id = r.dst_id WHERE r.src_kind = 'entity' AND "
        "t.kind = 'topic' AND t.norm_name = 'authentication' AND rule.kind = 'rule'",
    )
    assert {r[0] for r in rules} == {"auth", "api-validation", "migrations"}


async def test_every_directive_gets_an_embedding(loaded: RulesService, memoir: Memoir) -> None:
    directives = await _count(memoir, "SELECT count(*) FROM item WHERE kind='directive'")
    vectors = await _count(memoir, "SELECT count(*) FROM item_vec WHERE kind='directive'")
    assert directives == 9
    assert vectors == directives


async def test_reingesting_an_unchanged_file_changes_nothing(
    loaded: RulesService, memoir: Memoir, project: Path
) -> None:
    snapshot_sql = (
        "SELECT (SELECT group_concat(item_id || uid || updated_at) FROM item), "
        "(SELECT count(*) FROM relation), (SELECT count(*) FROM entity), "
        "(SELECT group_concat(updated_at) FROM resource), "
        "(SELECT value FROM meta WHERE key = 'graph_version:s')"
    )
    before = await _rows(memoir, snapshot_sql)

    report = await loaded.upsert_markdown([str(project / "rules")], scope="s")

    assert {d.status for d in report.documents} == {"unchanged"}
    assert report.directives_added == report.relations_established == 0
    assert await _rows(memoir, snapshot_sql) == before


async def test_a_document_an_older_parser_read_is_parsed_again(
    loaded: RulesService, memoir: Memoir, project: Path
) -> None:
    # A store written before the parser improved: same text, older (here: no) parser version.
    await memoir.store.db.write(
        lambda conn: conn.execute(
            "UPDATE resource SET metadata = json_remove(metadata, '$.parser_version') "
            "WHERE uri = 'rules/auth.md'"
        )
    )

    report = await loaded.upsert_markdown([str(project / "rules")], scope="s")

    statuses = {d.path: d.status for d in report.documents}
    assert statuses.pop("rules/auth.md") == "updated"
    assert set(statuses.values()) == {"unchanged"}
    versions = await _rows(
        memoir,
        "SELECT DISTINCT metadata ->> '$.parser_version' FROM resource WHERE uri LIKE 'rules/%'",
    )
    assert versions == [(PARSER_VERSION,)]
    again = await loaded.upsert_markdown([str(project / "rules")], scope="s")
    assert {d.status for d in again.documents} == {"unchanged"}


async def test_removed_directive_disappears_and_unchanged_ones_keep_their_ids(
    loaded: RulesService, memoir: Memoir, project: Path
) -> None:
    path = project / "rules" / "auth.md"
    before = dict(await _rows(memoir, "SELECT item.metadata ->> '$.statement', item_id FROM item"))
    edited = AUTH_RULE.replace("### [MAY] Offer passkeys\nPasskeys are phishing resistant.\n", "")
    path.write_text(edited, encoding="utf-8")

    report = await loaded.upsert_markdown([str(path)], scope="s")

    assert report.directives_removed == 1
    assert report.directives_added == 0
    assert report.documents[0].status == "updated"
    after = dict(await _rows(memoir, "SELECT item.metadata ->> '$.statement', item_id FROM item"))
    assert "Offer passkeys" not in after
    assert after["Keep sessions short-lived"] == before["Keep sessions short-lived"]
    gone = before["Offer passkeys"]
    assert await _count(memoir, "SELECT count(*) FROM item_fts WHERE rowid = ?", gone) == 0
    assert await _count(memoir, "SELECT count(*) FROM item_vec WHERE item_id = ?", gone) == 0
    assert (
        await _count(
            memoir,
            "SELECT count(*) FROM relation WHERE (src_kind='item' AND src_id=?) OR "
            "(dst_kind='item' AND dst_id=?)",
            gone,
            gone,
        )
        == 0
    )
    assert (
        await _count(memoir, "SELECT count(*) FROM item_fts WHERE item_fts MATCH 'passkeys'") == 0
    )


async def test_changed_directive_is_replaced(
    loaded: RulesService, memoir: Memoir, project: Path
) -> None:
    path = project / "rules" / "auth.md"
    path.write_text(AUTH_RULE.replace("30 minutes", "15 minutes"), encoding="utf-8")

    report = await loaded.upsert_markdown([str(path)], scope="s")

    assert (report.directives_added, report.directives_removed, report.directives_unchanged) == (
        1,
        1,
        2,
    )
    texts = [r[0] for r in await _rows(memoir, "SELECT text FROM item WHERE kind='directive'")]
    assert any("15 minutes" in t for t in texts)
    assert not any("30 minutes" in t for t in texts)


async def test_merge_keeps_both_sources_overwrite_replaces_them(
    service: RulesService, memoir: Memoir, project: Path
) -> None:
    # Same file name in two folders = same rule name ("auth").
    extra = AUTH_RULE.replace(
        "Hash passwords", "Lock accounts after repeated failures; hash passwords"
    )
    extra = extra.replace("### [SHOULD] Keep sessions short-lived", "### [SHOULD] Rotate tokens")
    write_rules(project / "team", {"auth.md": extra})
    first = project / "rules" / "auth.md"
    second = project / "team" / "auth.md"
    await service.upsert_markdown([str(first)], scope="s")

    merged = await service.upsert_markdown([str(second)], scope="s")
    rule = await service.get_rule("auth", scope="s")

    assert merged.directives_removed == 0
    assert sorted(rule.summary.sources) == ["rules/auth.md", "team/auth.md"]
    assert rule.summary.directive_count == 6

    second.write_text(extra + "\n", encoding="utf-8")  # a change, so the upsert does work
    replaced = await service.upsert_markdown([str(second)], scope="s", overwrite=True)
    rule = await service.get_rule("auth", scope="s")

    assert replaced.directives_removed == 3
    assert rule.summary.sources == ["team/auth.md"]
    assert rule.summary.directive_count == 3
    assert await _count(memoir, "SELECT count(*) FROM resource WHERE uri = 'rules/auth.md'") == 0


async def test_bad_documents_are_reported_and_the_rest_continue(
    service: RulesService, project: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text(AUTH_RULE, encoding="utf-8")
    missing_layer = AUTH_RULE.replace("**Layer:** 2-Application\n", "")
    write_rules(project / "more", {"no-layer.md": missing_layer})
    escape = project / "rules" / "escape.md"
    os.symlink(outside, escape)

    report = await service.upsert_markdown(
        [
            str(project / "rules" / "does-not-exist.md"),
            str(project / "rules" / ".." / ".." / "outside.md"),
            str(escape),
            str(project / "more" / "no-layer.md"),
            str(project / "rules" / "auth.md"),
        ],
        scope="s",
    )

    statuses = {d.path: d.status for d in report.documents}
    assert statuses["rules/auth.md"] == "created"
    assert statuses["more/no-layer.md"] == "created"  # ingested, with a validation error
    assert report.documents_failed == 3
    assert any("does not exist" in (d.error or "") for d in report.documents)
    assert sum("outside the allowed roots" in (d.error or "") for d in report.documents) == 2
    layer_issues = [i for i in report.issues if i.field and i.field.lower() == "layer"]
    assert layer_issues and layer_issues[0].line >= 1
    assert any("more/no-layer.md" in w and "layer" in w.lower() for w in report.warnings)


async def test_folder_walk_picks_up_foreign_formats(service: RulesService, project: Path) -> None:
    write_rules(
        project / "repo",
        {
            "AGENTS.md": "# AGENTS.md\n\n## Testing\n\n- Never mock the database in tests.\n",
            ".cursor/rules/react.mdc": "---\ndescription: React\nglobs: src/**/*.tsx\n"
            "alwaysApply: false\n---\n\n- Always use function components.\n",
            "CLAUDE.md": "# CLAUDE.md\n\n- Prefer structlog over print.\n",
        },
    )
    report = await service.upsert_markdown([str(project / "repo")], scope="s")
    formats = {d.path: d.format for d in report.documents}
    assert formats == {
        "repo/AGENTS.md": "agents_md",
        "repo/CLAUDE.md": "claude_md",
        "repo/.cursor/rules/react.mdc": "cursor_mdc",
    }
    assert report.directives_added == 3


async def test_secrets_are_flagged_and_never_logged(service: RulesService, project: Path) -> None:
    secret = "AKIA" + "Q3EGRT7PLM2WX4ZB"
    text = AUTH_RULE.replace("hasher.hash(password)", f'aws_key = "{secret}"')
    write_rules(project / "leak", {"leak.md": text})
    with capture_logs() as logs:
        report = await service.upsert_markdown([str(project / "leak" / "leak.md")], scope="s")
    assert any(w.startswith("SECURITY") for w in report.warnings)
    assert secret not in "".join(report.warnings)
    assert secret not in repr(logs)
    assert "Hash passwords" not in repr(logs)  # no document text in logs (Req 13.1)
    upsert_log = next(entry for entry in logs if entry["event"] == "rules upserted")
    assert upsert_log["secrets_flagged"] >= 1


async def test_upsert_text_takes_raw_markdown_with_a_safe_virtual_path(
    service: RulesService,
) -> None:
    report = await service.upsert_text(AUTH_RULE, path="rules/remote-auth.md", scope="s")
    assert report.documents[0].path == "rules/remote-auth.md"
    assert report.directives_added == 3
    for bad in ("../etc/passwd.md", "/etc/rules.md", "C:/x.md"):
        with pytest.raises(PathNotAllowedError):
            await service.upsert_text(AUTH_RULE, path=bad, scope="s")
    with pytest.raises(InvalidInputError):
        await service.upsert_text("   ", path="rules/empty.md", scope="s")


async def test_explicit_allowed_roots_replace_the_default(
    service: RulesService, project: Path
) -> None:
    report = await service.upsert_markdown(
        [str(project / "rules" / "auth.md")], scope="s", allowed_roots=[str(project / "other")]
    )
    assert report.documents_failed == 1
    assert "outside the allowed roots" in (report.documents[0].error or "")


async def test_scopes_do_not_see_each_other(loaded: RulesService) -> None:
    assert len(await loaded.list_rules(scope="s")) == 4
    assert await loaded.list_rules(scope="other") == []


async def test_remove_rule_by_id_and_by_path(loaded: RulesService, memoir: Memoir) -> None:
    by_id = await loaded.remove_rule("auth", scope="s")
    by_path = await loaded.remove_rule("rules/logging.md", scope="s")
    assert by_id.directives_removed == 3 and by_id.rule_ids == ["auth"]
    assert by_path.rule_ids == ["logging"]
    remaining = {r.rule_id for r in await loaded.list_rules(scope="s")}
    assert remaining == {"api-validation", "migrations"}
    assert await _count(memoir, "SELECT count(*) FROM item WHERE kind='directive'") == 4
    from memory_core.errors import NotFoundError

    with pytest.raises(NotFoundError):
        await loaded.remove_rule("no-such-rule", scope="s")


async def test_entities_dropped_by_one_document_are_recreated_for_the_next(
    service: RulesService, memoir: Memoir, project: Path
) -> None:
    one = AUTH_RULE.replace("**Topics:** security, auth, api", "**Topics:** zeta-topic")
    write_rules(project / "batch", {"a.md": one})
    await service.upsert_markdown([str(project / "batch")], scope="s")
    # In one upsert (one transaction): a.md drops the topic, b.md (after it) adopts it.
    write_rules(project / "batch", {"a.md": AUTH_RULE, "b.md": one.replace("Authentication", "B")})
    await service.upsert_markdown([str(project / "batch")], scope="s")
    dangling = await _count(
        memoir,
        "SELECT count(*) FROM relation r WHERE r.dst_kind = 'entity' AND NOT EXISTS "
        "(SELECT 1 FROM entity e WHERE e.entity_id = r.dst_id)",
    )
    assert dangling == 0
    topics = [r[0] for r in await _rows(memoir, "SELECT norm_name FROM entity WHERE kind='topic'")]
    assert "zeta-topic" in topics


async def test_code_examples_keep_their_language_and_rationale(loaded: RulesService) -> None:
    detail = await loaded.get_rule("auth", scope="s")
    hashing = next(d for d in detail.directives if d.text.startswith("Hash passwords"))
    assert hashing.examples == [
        {"language": "python", "code": "hasher.hash(password)\n", "anti_pattern": False}
    ]
    assert hashing.line_start is not None and hashing.line_end > hashing.line_start
    assert hashing.token_count > 0


async def test_folder_walk_skips_plain_markdown_but_a_named_file_is_ingested(
    service: RulesService, project: Path
) -> None:
    readme = "# Project\n\n- Always run the linter before pushing.\n"
    write_rules(project / "docs", {"README.md": readme})
    walked = await service.upsert_markdown([str(project / "docs")], scope="s")
    assert [(d.path, d.status) for d in walked.documents] == [("docs/README.md", "skipped")]
    named = await service.upsert_markdown([str(project / "docs" / "README.md")], scope="s")
    assert named.documents[0].status == "created"


async def test_failed_embeddings_keep_directives_searchable_by_keywords(
    service: RulesService, memoir: Memoir, project: Path
) -> None:
    from collections.abc import Sequence

    import numpy as np

    from memory_core.embed.hashing import HashingEncoder
    from memory_core.embed.local import LocalEmbedder
    from memory_core.errors import EmbeddingError

    class BrokenEmbedder(LocalEmbedder):
        async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
            raise EmbeddingError("model file unreadable", hint="reinstall")

    memoir.context.embedder = BrokenEmbedder(HashingEncoder(384), embedder_id="hash:384")
    report = await service.upsert_markdown([str(project / "rules" / "auth.md")], scope="s")
    assert report.directives_added == 3
    assert any("embeddings failed" in w for w in report.warnings)
    assert await _count(memoir, "SELECT count(*) FROM item_vec") == 0

    result = await service.query_directives("hash passwords", scope="s")
    assert "semantic ranking unavailable" in " ".join(result.diagnostics.warnings)
    assert result.directives[0].text == "Hash passwords with the platform library"


async def test_a_store_without_the_rule_ports_names_them_and_the_fix(
    memoir: Memoir, project: Path
) -> None:
    import dataclasses

    from memory_core.errors import ConfigError
    from memory_core.storage import create_store

    # A MySQL/MariaDB store holds the hierarchy's ports, not the graph (not opened: the
    # check is on its capabilities, before any statement).
    store = create_store("mysql://root@127.0.0.1:3306/memoir")
    ctx = dataclasses.replace(memoir.context, store=store)
    with pytest.raises(ConfigError) as caught:
        await RulesService(ctx, cwd=project).query_directives("Add a login endpoint", scope="s")
    assert "the graph ports" in caught.value.message
    assert "mysql" in caught.value.message and "sqlite:///" in (caught.value.hint or "")
