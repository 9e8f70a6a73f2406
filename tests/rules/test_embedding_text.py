"""What a directive's vector is made of, and stores indexed another way being indexed again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rule_texts import AUTH_RULE
from rules_testkit import write_rules

from memory_core.rules import graph
from memory_core.rules.graph import INDEX_VERSION, build_plan, embed_text
from memory_core.rules.service import RulesService
from memory_core.rules.topics import TopicNormalizer
from memory_core.scope import Scope
from memory_core.service import Memoir
from rules_parser import RuleDocument, parse

pytestmark = pytest.mark.anyio

AGENTS_MD = """\
# AGENTS.md

## Security
- Never commit secrets; configuration comes from the environment.

## Pull requests
- Run `make check` before opening a pull request.
"""
SECRETS = "Never commit secrets; configuration comes from the environment."


def _parse(text: str, path: str) -> RuleDocument:
    document = parse(text, path).document
    assert document is not None
    return document


async def test_a_bullet_is_embedded_with_the_heading_it_sits_under_and_the_title_once() -> None:
    document = _parse(AGENTS_MD, "AGENTS.md")
    by_text = {d.text: d for d in document.directives}
    checks = by_text["Run `make check` before opening a pull request."]

    in_context = embed_text(document, by_text[SECRETS])

    # Before: "AGENTS.md. AGENTS.md. Never commit …" (the heading above the nearest one).
    assert in_context == f"{document.title or document.rule_name}. Security. {SECRETS}"
    assert in_context.count("AGENTS") == 1
    assert embed_text(document, checks).split(". ")[1] == "Pull requests"


async def test_a_template_directive_is_embedded_with_its_rule_title_not_its_own_heading() -> None:
    document = _parse(AUTH_RULE, "rules/auth.md")
    directive = next(d for d in document.directives if d.text == "Keep sessions short-lived")

    assert embed_text(document, directive) == (
        "Authentication. Keep sessions short-lived. Expire idle sessions after 30 minutes."
    )


async def test_what_is_embedded_is_part_of_a_directive_identity(
    memoir: Memoir, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = _parse(AGENTS_MD, "AGENTS.md")

    def uids() -> list[str]:
        plan = build_plan(
            document,
            scope=Scope.of("s"),
            uri="AGENTS.md",
            tokens=memoir.tokens,
            topics=TopicNormalizer(),
        )
        return [d.item.uid for d in plan.directives]

    today = uids()
    monkeypatch.setattr(graph, "embed_text", lambda doc, directive: directive.text)

    assert set(uids()).isdisjoint(today)


async def test_a_store_indexed_another_way_is_embedded_again_on_reingest(
    service: RulesService, memoir: Memoir, project: Path
) -> None:
    write_rules(project, {"AGENTS.md": AGENTS_MD})
    await service.upsert_markdown([str(project / "AGENTS.md")], scope="s")
    # A store written before the index changed: no index version, and directive uids derived
    # from another embedded text.
    await memoir.store.db.write(
        lambda conn: conn.execute(
            "UPDATE resource SET metadata = json_remove(metadata, '$.index_version')"
        )
    )
    await memoir.store.db.write(
        lambda conn: conn.execute("UPDATE item SET uid = uid || '-v1' WHERE kind = 'directive'")
    )

    report = await service.upsert_markdown([str(project / "AGENTS.md")], scope="s")

    assert [d.status for d in report.documents] == ["updated"]
    assert report.directives_added == report.directives_removed == 2
    rows = await memoir.store.db.read(
        lambda conn: conn.execute(
            "SELECT item_id FROM item WHERE metadata ->> '$.statement' = ?", (SECRETS,)
        ).fetchall()
    )
    item_id = int(rows[0][0])
    stored = await memoir.store.read(lambda tx: tx.vectors.vectors([item_id]))
    document = _parse(AGENTS_MD, "AGENTS.md")
    secrets = next(d for d in document.directives if d.text == SECRETS)
    expected = await memoir.embedder.embed_documents([embed_text(document, secrets)])
    assert np.allclose(stored[item_id], expected[0], atol=1e-5)
    versions = await memoir.store.db.read(
        lambda conn: conn.execute(
            "SELECT DISTINCT metadata ->> '$.index_version' FROM resource"
        ).fetchall()
    )
    assert [tuple(v) for v in versions] == [(INDEX_VERSION,)]
    again = await service.upsert_markdown([str(project / "AGENTS.md")], scope="s")
    assert [d.status for d in again.documents] == ["unchanged"]


async def test_reembed_gives_a_directive_the_vector_a_fresh_ingest_gives(
    service: RulesService, memoir: Memoir, project: Path
) -> None:
    write_rules(project, {"AGENTS.md": AGENTS_MD})
    await service.upsert_markdown([str(project / "AGENTS.md")], scope="s")

    async def directive_vectors() -> dict[int, np.ndarray]:
        ids = await memoir.store.db.read(
            lambda conn: [
                int(r[0]) for r in conn.execute("SELECT item_id FROM item WHERE kind = 'directive'")
            ]
        )
        return await memoir.store.read(lambda tx: tx.vectors.vectors(ids))

    ingested = await directive_vectors()
    assert len(ingested) == 2

    await memoir.reembed()

    # Before: reembed embedded the stored item text (the bare statement and its detail), not
    # "title. heading. statement", so the vectors changed and ranking differed after a reembed.
    again = await directive_vectors()
    assert again.keys() == ingested.keys()
    for item_id, vector in ingested.items():
        assert np.allclose(again[item_id], vector, atol=1e-5)
