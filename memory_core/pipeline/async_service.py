"""The async twin of :class:`~memory_core.pipeline.service.MemoryService`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from memory_core.pipeline.contract import StepSpec
from memory_core.pipeline.results import EvolveResult, MemorizeResult, RetrieveResult

if TYPE_CHECKING:
    from memory_core.pipeline.service import MemoryService

__all__ = ["AsyncMemoryService"]


class AsyncMemoryService:
    """The async twin: the same API, each call run in a worker thread (the store and the
    runner are synchronous units of work; the event loop never blocks)."""

    def __init__(self, sync: MemoryService) -> None:
        self.sync = sync

    @classmethod
    async def create(cls, **kwargs: Any) -> AsyncMemoryService:
        """See :meth:`MemoryService.create` (same arguments and errors)."""
        from memory_core.pipeline.service import MemoryService

        return cls(await asyncio.to_thread(lambda: MemoryService.create(**kwargs)))

    @property
    def meta(self) -> dict[str, Any]:
        return self.sync.meta

    async def memorize(self, scope: Any, **kwargs: Any) -> MemorizeResult:
        return await asyncio.to_thread(lambda: self.sync.memorize(scope, **kwargs))

    async def retrieve(self, scope_selector: Any, query: str, **kwargs: Any) -> RetrieveResult:
        return await asyncio.to_thread(lambda: self.sync.retrieve(scope_selector, query, **kwargs))

    async def evolve(self, scope: Any, **kwargs: Any) -> EvolveResult:
        return await asyncio.to_thread(lambda: self.sync.evolve(scope, **kwargs))

    async def list_categories(self, scope: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return await asyncio.to_thread(lambda: self.sync.list_categories(scope, **kwargs))

    async def get_category(self, scope: Any, category: str, **kwargs: Any) -> dict[str, Any]:
        return await asyncio.to_thread(lambda: self.sync.get_category(scope, category, **kwargs))

    async def get_latest_intention(self, scope: Any, **kwargs: Any) -> dict[str, Any] | None:
        return await asyncio.to_thread(lambda: self.sync.get_latest_intention(scope, **kwargs))

    async def config(self, step_id: str, **changes: Any) -> int:
        return await asyncio.to_thread(lambda: self.sync.config(step_id, **changes))

    async def insert_after(self, step_id: str, new_step: StepSpec) -> int:
        return await asyncio.to_thread(self.sync.insert_after, step_id, new_step)

    async def insert_before(self, step_id: str, new_step: StepSpec) -> int:
        return await asyncio.to_thread(self.sync.insert_before, step_id, new_step)

    async def replace(self, step_id: str, new_step: StepSpec) -> int:
        return await asyncio.to_thread(self.sync.replace, step_id, new_step)

    async def remove(self, step_id: str) -> int:
        return await asyncio.to_thread(self.sync.remove, step_id)

    async def disable(self, step_id: str) -> int:
        return await asyncio.to_thread(self.sync.disable, step_id)

    async def revisions(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.sync.revisions)

    async def diff(self, old: int, new: int | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.diff, old, new)

    async def rollback(self, revision: int) -> int:
        return await asyncio.to_thread(self.sync.rollback, revision)

    async def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.sync.runs, limit)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)
