"""What every feature service receives: the open store, the models and the engine.

The facade (:mod:`memory_core.service`) builds one :class:`CoreContext` at open and passes it
to each feature explicitly: no module-level singletons, no service locator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memory_core.config import Settings
from memory_core.embed.base import Embedder
from memory_core.retrieval.engine import SearchEngine
from memory_core.storage.ports import Store
from memory_core.tokens import TokenCounter

__all__ = ["CoreContext"]


@dataclass
class CoreContext:
    """The settings, the open store, the embedder and the token counter of one facade."""

    settings: Settings
    store: Store
    embedder: Embedder
    tokens: TokenCounter

    @property
    def engine(self) -> SearchEngine:
        """The one hybrid search engine over this store and embedder (a light value)."""
        return SearchEngine(self.store, self.embedder, self.settings.search)

    @property
    def url(self) -> str:
        """The store's URL as given (passwords included: never log it; use ``redacted()``)."""
        return self.store.url.raw

    async def embed_texts(self, texts: list[str]) -> np.ndarray:
        return await self.embedder.embed_documents(texts)
