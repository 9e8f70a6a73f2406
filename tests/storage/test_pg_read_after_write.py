"""A read on one PostgreSQL store sees what another store (another server process) committed
before the read began, on a pooled connection that has served reads before: every read is its
own REPEATABLE READ transaction, whose snapshot is taken at its first statement, never kept
from an earlier one.
"""

from __future__ import annotations

import pytest
from store_testkit import DIM, fresh_pg_database, unit_vectors

from memory_core.models import NewItem
from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.ports import LexicalQuery

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


async def test_a_read_sees_another_stores_acknowledged_write(pg_admin_url: str) -> None:
    url = fresh_pg_database(pg_admin_url)
    writer, reader = await open_store(url), await open_store(url)
    scope = Scope.of("project:/tmp/read-after-write")
    try:
        await writer.ensure_embedder("hash:read-after-write", DIM)
        vectors = unit_vectors(6)
        for n in range(6):
            # The reader's pooled connection served a read before each write.
            stamp = await reader.read(lambda tx: tx.vectors.stamp(scope))
            item = NewItem(
                uid=f"u{n}", kind="chunk", text=f"marker{n} text", token_count=2, scope=scope
            )
            [item_id] = await writer.write(
                lambda tx, item=item, n=n: tx.items.add([item], vectors[n : n + 1])
            )

            def seen(tx, item_id=item_id, n=n):  # type: ignore[no-untyped-def]
                lexical = tx.lexical.search(LexicalQuery((f"marker{n}",), "AND"), scope)
                return (
                    item_id in tx.items.get([item_id]),
                    [h.item_id for h in lexical],
                    tx.vectors.count(scope),
                    tx.vectors.stamp(scope),
                )

            found, lexical, count, after = await reader.read(seen)
            assert found and lexical == [item_id] and count == n + 1
            assert after != stamp
    finally:
        await writer.close()
        await reader.close()
