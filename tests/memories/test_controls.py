"""User controls and privacy (spec "User Controls & Privacy", "Security & Privacy"): pin,
forget with a 24-hour tombstone, settings, incognito, the audit trail, retention, isolation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from memory_testkit import SPACE

from memory_core.errors import NotFoundError
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio


async def _events(memoir: Memoir, space: str = SPACE, user: str | None = None) -> list[str]:
    scope = memoir.memories.space(space, user).scope
    found = await memoir.store.read(lambda tx: tx.log.events(scope, limit=1000))
    return [e.kind for e in reversed(found)]


async def test_pin_and_unpin_are_saved_and_audited(memoir: Memoir) -> None:
    saved = await memoir.memories.remember("Deploys need two approvals", space=SPACE)
    assert saved.memory is not None
    assert (await memoir.memories.pin(saved.memory.id, space=SPACE)).pinned
    listed = await memoir.memories.entries(space=SPACE, pinned=True)
    assert [e.id for e in listed.entries] == [saved.memory.id]
    assert not (await memoir.memories.unpin(saved.memory.id[:8], space=SPACE)).pinned
    assert (await memoir.memories.entries(space=SPACE, pinned=True)).total == 0
    assert (await _events(memoir))[-2:] == ["pin", "unpin"]


async def test_forget_hard_deletes_the_row_its_lexical_and_vector_rows(memoir: Memoir) -> None:
    saved = await memoir.memories.remember("The VPN password rotates monthly", space=SPACE)
    assert saved.memory is not None and not saved.memory.needs_embedding
    scope = memoir.memories.space(SPACE).scope
    result = await memoir.memories.forget(saved.memory.id, space=SPACE)
    assert result.forgotten

    def leftovers(tx):  # type: ignore[no-untyped-def]
        from memory_core.storage.ports import LexicalQuery

        return (
            tx.items.by_uid([saved.memory.id]),
            tx.lexical.search(LexicalQuery(("vpn",), "OR"), scope),
            tx.vectors.count(scope),
        )

    items, lexical, vectors = await memoir.store.read(leftovers)
    assert items == {} and lexical == [] and vectors == 0
    with pytest.raises(NotFoundError):
        await memoir.memories.show(saved.memory.id, space=SPACE)
    assert "forget" in await _events(memoir)


async def test_a_forgotten_text_cannot_be_recreated_for_24_hours(memoir: Memoir) -> None:
    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    saved = await memoir.memories.remember("My bank is Acme", space=SPACE, now=now)
    assert saved.memory is not None
    await memoir.memories.forget(saved.memory.id, space=SPACE, now=now)
    blocked = await memoir.memories.remember(
        "my bank is ACME", space=SPACE, now=now + timedelta(hours=23)
    )
    assert blocked.status == "blocked" and blocked.memory is None
    again = await memoir.memories.remember(
        "My bank is Acme", space=SPACE, now=now + timedelta(hours=25)
    )
    assert again.status == "created"


async def test_forgetting_the_newest_fact_makes_the_older_one_current_again(memoir: Memoir) -> None:
    old = await memoir.memories.remember("The weekly sync is on Tuesdays", space=SPACE)
    new = await memoir.memories.remember("The weekly sync moved to Wednesdays", space=SPACE)
    assert old.memory is not None and new.memory is not None and new.superseded
    await memoir.memories.forget(new.memory.id, space=SPACE)
    restored = await memoir.memories.show(old.memory.id, space=SPACE)
    assert restored.valid_to is None and restored.superseded_by is None


async def test_memory_off_neither_saves_nor_recalls(memoir: Memoir) -> None:
    await memoir.memories.remember("Prefers dark mode", space=SPACE)
    await memoir.memories.update_settings(space=SPACE, memory_enabled=False)
    skipped = await memoir.memories.remember("Prefers light mode", space=SPACE)
    recalled = await memoir.memories.recall("mode", space=SPACE)
    assert skipped.status == "skipped" and "off" in (skipped.reason or "")
    assert recalled.status == "disabled" and recalled.results == []
    await memoir.memories.update_settings(space=SPACE, memory_enabled=True)
    assert [r.text for r in (await memoir.memories.recall("mode", space=SPACE)).results] == [
        "Prefers dark mode"
    ]
    assert "settings" in await _events(memoir)


async def test_an_incognito_session_neither_persists_nor_retrieves(memoir: Memoir) -> None:
    await memoir.memories.remember("Prefers dark mode", space=SPACE)
    view = await memoir.memories.incognito_start(space=SPACE, session="chat-7")
    assert view.incognito
    secret = await memoir.memories.remember("My salary is 100k", space=SPACE, session="chat-7")
    hidden = await memoir.memories.recall("dark mode", space=SPACE, session="chat-7")
    assert secret.status == "skipped" and hidden.status == "incognito" and hidden.results == []
    # Other sessions are not affected.
    assert (await memoir.memories.recall("dark mode", space=SPACE, session="chat-8")).results
    await memoir.memories.incognito_end(space=SPACE, session="chat-7")
    assert (await memoir.memories.recall("dark mode", space=SPACE, session="chat-7")).results
    assert (await memoir.memories.entries(space=SPACE)).total == 1  # the secret was never stored
    assert (await _events(memoir)).count("incognito") == 2


async def test_incognito_default_makes_new_sessions_incognito(memoir: Memoir) -> None:
    await memoir.memories.update_settings(space=SPACE, incognito_default=True)
    assert (
        await memoir.memories.remember("x marks the spot", space=SPACE, session="s1")
    ).status == "skipped"
    await memoir.memories.incognito_end(space=SPACE, session="s1")
    assert (
        await memoir.memories.remember("x marks the spot", space=SPACE, session="s1")
    ).status == "created"


async def test_every_user_action_is_audited(memoir: Memoir) -> None:
    saved = await memoir.memories.remember("Remember: deploys need approval", space=SPACE)
    assert saved.memory is not None
    await memoir.memories.pin(saved.memory.id, space=SPACE)
    await memoir.memories.unpin(saved.memory.id, space=SPACE)
    await memoir.memories.update_settings(space=SPACE, memory_enabled=True)
    await memoir.memories.incognito_start(space=SPACE)
    await memoir.memories.incognito_end(space=SPACE)
    await memoir.memories.forget(saved.memory.id, space=SPACE)
    assert await _events(memoir) == [
        "remember",
        "pin",
        "unpin",
        "settings",
        "incognito",
        "incognito",
        "forget",
    ]
    stats = await memoir.memories.stats(space=SPACE)
    assert stats.user_actions == {
        "forget": 1,
        "incognito": 2,
        "pin": 1,
        "remember": 1,
        "settings": 1,
        "unpin": 1,
    }


async def test_retention_hard_deletes_unpinned_entries_older_than_180_days(memoir: Memoir) -> None:
    now = datetime(2026, 9, 1, tzinfo=UTC)
    old = await memoir.memories.remember(
        "Old fact about builds",
        space=SPACE,
        created_at=now - timedelta(days=170),
        now=now - timedelta(days=170),
    )
    kept = await memoir.memories.remember(
        "Old pinned fact about deploys",
        space=SPACE,
        created_at=now - timedelta(days=170),
        pin=True,
        now=now - timedelta(days=170),
    )
    fresh = await memoir.memories.remember("Fresh fact about tests", space=SPACE, now=now)
    assert old.memory and kept.memory and fresh.memory
    later = now + timedelta(days=20)
    gone = await memoir.memories.apply_retention(space=SPACE, now=later)
    assert gone == [old.memory.id]
    left = {e.id for e in (await memoir.memories.entries(space=SPACE)).entries}
    assert left == {kept.memory.id, fresh.memory.id}
    assert "retention" in await _events(memoir)


async def test_spaces_and_users_are_isolated(memoir: Memoir) -> None:
    combos = [("TheoEngine", "ana"), ("TheoEngine", "ben"), ("PestIQ", "ana"), ("PestIQ", "ben")]
    ids = {}
    for space, user in combos:
        result = await memoir.memories.remember(
            f"The secret word is {space}-{user}", space=space, user=user
        )
        assert result.status == "created"  # not merged across spaces or users
        ids[(space, user)] = result.memory.id  # type: ignore[union-attr]
    for space, user in combos:
        found = await memoir.memories.recall("secret word", space=space, user=user)
        assert [r.id for r in found.results] == [ids[(space, user)]]
        listed = await memoir.memories.entries(space=space, user=user)
        assert [e.id for e in listed.entries] == [ids[(space, user)]]
        for other in combos:
            if other != (space, user):
                with pytest.raises(NotFoundError):
                    await memoir.memories.show(ids[other], space=space, user=user)
                with pytest.raises(NotFoundError):
                    await memoir.memories.forget(ids[other], space=space, user=user)
    await memoir.memories.update_settings(space="PestIQ", user="ana", memory_enabled=False)
    assert (await memoir.memories.recall("secret", space="TheoEngine", user="ana")).results


async def test_an_entry_older_than_the_retention_is_deleted_at_once_and_says_so(
    memoir: Memoir,
) -> None:
    now = datetime(2026, 9, 1, tzinfo=UTC)
    result = await memoir.memories.remember(
        "An ancient fact", space=SPACE, created_at=now - timedelta(days=400), now=now
    )
    assert result.status == "created" and result.memory is None
    assert "retention" in (result.reason or "")
