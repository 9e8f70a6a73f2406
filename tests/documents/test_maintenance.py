from __future__ import annotations

import pytest

from memory_core.service import Memoir
from memory_core.storage.sqlite.health import index_consistency

pytestmark = pytest.mark.anyio


async def test_doctor_reports_tombstones_and_compact_clears_them(memoir: Memoir) -> None:
    await memoir.documents.add_text("one two three", path="a.md", scope="s")
    await memoir.documents.add_text("four five", path="b.md", scope="s")
    await memoir.documents.remove(["a.md/"], scope="s")
    findings = {f.check: f for f in (await memoir.doctor()).findings}
    assert findings["documents.tombstones"].status == "warning"
    assert findings["documents.tombstones"].fix
    assert findings["documents.orphan_chunks"].status == "ok"
    result = await memoir.documents.compact()
    assert result["purged"] == {"documents": 1, "tombstones": 1}
    findings = {f.check: f for f in (await memoir.doctor()).findings}
    assert all(f.status == "ok" for k, f in findings.items() if k.startswith("documents."))
    counts = await memoir.store.db.read(index_consistency)  # type: ignore[attr-defined]
    assert set(counts.values()) == {0}
    stats = await memoir.documents.stats(scope="s")
    assert stats["documents"]["documents"] == 1 and stats["documents"]["tombstoned_documents"] == 0
